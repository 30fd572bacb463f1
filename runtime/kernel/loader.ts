/**
 * The libbpf loader: opens bpf/hive.bpf.o, sets its read-only data for the running
 * kernel, loads it, attaches it the least-privileged way the kernel allows
 * (runtime/kernel/attach.ts), keeps the watch map equal to the desired set by diff, and
 * delivers ring-buffer events (event-delivery.ts). Maps (and the link, where the kernel
 * can pin it) live under a bpffs directory so that a restarted agent adopts them. Which attach
 * mode to open it in is open-watcher.ts's choice.
 */
import type { Logger } from "../log.ts";
import { AllowMap } from "./allow-map.ts";
import { ATTACH_PROGRAMS, type KernelFacts, PROGRAM_PIN } from "./attach.ts";
import { DEFAULT_PIN_ROOT } from "./bpffs.ts";
import type {
  AllowedCount,
  AllowRule,
  Ancestor,
  AttachMode,
  DenyState,
  KernelEvent,
  KernelWatcher,
  ProcessIdentity,
  RingGate,
  SyncResult,
  WatchEntry,
} from "./contract.ts";
import { readCounters } from "./counters.ts";
import { DenyLink } from "./deny-link.ts";
import { DENY_PROGRAMS, type DenyMechanism } from "./deny-mechanism.ts";
import {
  type DeliveryTiming,
  deliveredBy,
  deliveryTiming,
  startEventDelivery,
  waitDelivered,
} from "./event-delivery.ts";
import type { FloodSummaries } from "./flood-summaries.ts";
import { type InodePermissionSignature, inodePermissionSignature, overlayUpperOffset } from "./kernel-btf.ts";
import { check, libbpf, type Pointer } from "./libbpf-ffi.ts";
import { captureLibbpfLog } from "./load-errors.ts";
import {
  findMaps,
  findProgram,
  loadObject,
  mapFds,
  openObject,
  type PinnedMap,
  pinMaps,
  removeEmptyPinRoot,
  requireObjectFile,
  selectPrograms,
  sizeMaps,
  unpinAll,
} from "./object-load.ts";
import { DEFAULT_OBJECT_PATH } from "./object-path.ts";
import { ProcessTracking } from "./process-tracking.ts";
import { programInfo } from "./program-info.ts";
import { QuietMap } from "./quiet-map.ts";
import type { RingConsumer } from "./ring-consumer.ts";
import { setRodata } from "./rodata.ts";
import type { ProofMaps } from "./trap-proof.ts";
import { WatchMap } from "./watch-map.ts";
import { type ProgramReplaced, WatcherLinks } from "./watcher-links.ts";
import type { KernelWatcherOptions, LibbpfCounters } from "./watcher-options.ts";

export { linkPinName } from "./attach.ts";
export { DEFAULT_PIN_ROOT, isOnBpffs } from "./bpffs.ts";
export { DEFAULT_OBJECT_PATH } from "./object-path.ts";

/** hive_watch's max_entries in bpf/hive.bpf.c. */
export const DEFAULT_WATCH_CAPACITY = 65_536;

export type { KernelWatcherOptions, LibbpfCounters } from "./watcher-options.ts";

/** One attach mode to load and attach, and why it was chosen. */
interface AttachChoice {
  mode: AttachMode;
  reason: string;
  facts: KernelFacts;
}

/** The deny program this watcher loads: none where the kernel cannot deny, else fmod_ret unless told. */
function denyMechanismOf(options: KernelWatcherOptions): DenyMechanism | undefined {
  return options.denyUnavailable === undefined ? (options.denyMechanism ?? "fmod_ret") : undefined;
}

export class LibbpfKernelWatcher implements KernelWatcher {
  readonly attachMode: AttachMode;
  readonly attachReason: string;
  readonly signature: InodePermissionSignature;
  /**
   * Whether parent watches report directory-entry changes. Debian's 5.10 build split
   * inode_permission into inode_permission.part.0, which may_create/may_delete call
   * directly, bypassing the hook; there the loader adds a hook on
   * security_inode_permission for parent entries. False only if that is disabled
   * (parentHook: "never") or not attached: the agent must then re-resolve by polling.
   */
  readonly parentEvents: boolean;
  /** The trap, parent and change links (watcher-links.ts). */
  private readonly links: WatcherLinks;
  private tracking: ProcessTracking | null = null;
  /** hive_watch's max_entries. */
  readonly watchCapacity: number;
  /** True when an earlier agent's pinned link was adopted instead of attaching anew. */
  readonly adopted: boolean;
  readonly programFd: number;
  /** Events and bursts an earlier agent of another map layout left unread (open-watcher.ts). */
  upgradeDiscarded = 0n;
  private readonly lib = libbpf();
  private readonly obj: Pointer;
  /** The deny program's link, attached while an entry denies (deny-link.ts); null when not attaching. */
  private deny: DenyLink | null = null;
  private readonly pinRoot: string | null;
  private readonly fds: Record<PinnedMap, number>;
  private readonly maps: Record<PinnedMap, Pointer>;
  private watchMap!: WatchMap;
  private quietMap!: QuietMap;
  private allowMap!: AllowMap;
  private readonly listeners: Array<(event: KernelEvent) => void> = [];
  /** The ring's consumer; null when loaded without attaching. */
  consumer: RingConsumer | null = null;
  /** Bursts opened before this agent started (adopted maps), not this agent's to deliver. */
  private deliveredBase = 0n;
  private flood: FloodSummaries | undefined;
  private adoptedBeforeNs = 0n;
  private readonly ncpus: number;
  private readonly logger: Logger | undefined;
  private readonly facts: KernelFacts;
  private readonly timing: DeliveryTiming;
  private closed = false;

  /** Use openKernelWatcher, which picks the attach mode. */
  constructor(options: KernelWatcherOptions, choice: AttachChoice) {
    this.logger = options.logger;
    this.timing = deliveryTiming(options);
    this.attachMode = choice.mode;
    this.attachReason = choice.reason;
    this.facts = choice.facts;
    this.pinRoot = options.pinRoot === undefined ? DEFAULT_PIN_ROOT : options.pinRoot;
    const objectPath = options.objectPath ?? DEFAULT_OBJECT_PATH;
    requireObjectFile(objectPath);
    this.signature = inodePermissionSignature();
    // Debian's 5.10 split: only then does a parent watch need its own hook (see parentEvents).
    const split = this.signature.inodeArg === 0 && this.facts.splitInodePermission;
    const parentHook = options.parentHook ?? "auto";
    const loadParentHook = parentHook === "always" || (parentHook === "auto" && split);
    const attaching = options.attach !== false;
    captureLibbpfLog();
    this.ncpus = this.lib.libbpf_num_possible_cpus() as number;

    this.obj = openObject(this.lib, objectPath);
    this.links = new WatcherLinks({
      lib: this.lib,
      mode: this.attachMode,
      pinRoot: this.pinRoot,
      facts: this.facts,
      logger: this.logger,
      program: (name) => this.program(name),
    });
    try {
      selectPrograms(this.lib, this.obj, {
        mode: this.attachMode,
        parentHook: loadParentHook,
        deny: denyMechanismOf(options),
      });
      this.setRodata(options);
      this.maps = findMaps(this.lib, this.obj);
      this.watchCapacity = options.watchCapacity ?? DEFAULT_WATCH_CAPACITY;
      sizeMaps(this.lib, this.maps, options);
      if (this.pinRoot) pinMaps(this.lib, this.maps, this.pinRoot);
      loadObject(this.lib, this.obj, objectPath, this.attachMode, this.facts);
      const prog = this.program(ATTACH_PROGRAMS[this.attachMode].trap);
      this.programFd = check(this.lib.bpf_program__fd(prog) as number, "bpf_program__fd");
      this.fds = mapFds(this.lib, this.maps);
      this.openMaps();
      // Before the trap: an access is then never reported by a process the kernel has not seen.
      if (attaching) this.startTracking();
      this.adopted = attaching ? this.links.attachTrap(prog, this.programFd) : false;
      if (attaching) this.attachHooks(options, split && loadParentHook);
      this.parentEvents = !split || this.links.parentLink !== null;
      if (!this.parentEvents && attaching) {
        this.logger?.warn("parent watches are inert on this kernel (inode_permission is split)", {
          symbol: "inode_permission.part.0",
        });
      }
    } catch (error) {
      this.links.destroyAttached();
      this.tracking?.close(false);
      this.deny?.close({ detach: false });
      this.lib.bpf_object__close(this.obj);
      throw error;
    }
    if (attaching) this.openDelivery(options);
  }

  private program(name: string): Pointer {
    return findProgram(this.lib, this.obj, name);
  }

  /** The load-time configuration (const volatile in bpf/hive.bpf.c) for this kernel and these options. */
  private setRodata(options: KernelWatcherOptions): void {
    setRodata(this.obj, {
      hive_inode_arg: this.signature.inodeArg,
      hive_truncate_arg: this.signature.truncateDentryArg,
      hive_burst_gap_ns: this.timing.burstGapNs,
      hive_burst_max_ns: this.timing.burstMaxNs,
      hive_ovl_upper_off: overlayUpperOffset(),
      hive_flood_budget: options.floodBudget ?? 8,
      hive_flood_window_ns: this.timing.floodWindowNs,
    });
  }

  /** The user-side owners of the loaded maps, and the counters' baseline at adoption. */
  private openMaps(): void {
    const fds = this.fds;
    this.watchMap = new WatchMap(
      this.lib,
      { watch: fds.hive_watch, bitmap: fds.hive_bitmap, followed: fds.hive_followed },
      this.watchCapacity,
      this.logger,
    );
    this.quietMap = new QuietMap(this.lib, fds.hive_quiet, this.logger);
    this.allowMap = new AllowMap(this.lib, fds.hive_allow, this.logger);
    // Keyed by groups of the previous agent's slot numbering, if adopted: none may outlive it.
    this.quietMap.clear();
    const before = readCounters(fds.hive_counters, this.ncpus);
    this.deliveredBase = before.bursts - before.lost - before.held;
    // Read after the counters: a burst opened in between counts as backlog, so flush() may
    // wait longer, never return before this agent's own bursts are delivered.
    this.adoptedBeforeNs = process.hrtime.bigint();
  }

  private startTracking(): void {
    this.tracking = new ProcessTracking(
      this.lib,
      (name) => this.program(name),
      this.pinRoot,
      this.fds.hive_procs,
      this.logger,
    );
    try {
      this.tracking.start();
    } catch (error) {
      // Watching matters more than naming: alerts then say the executable is unknown (and
      // allow lists, failing closed, allow nothing).
      this.tracking.close(false);
      this.tracking = null;
      this.logger?.error("process tracking unavailable: alerts will name no executable", { error });
    }
  }

  /** After the trap: the deny program's link (attached on demand), the parent hook if needed, the change hooks. */
  private attachHooks(options: KernelWatcherOptions, parentHook: boolean): void {
    const mechanism = denyMechanismOf(options);
    this.deny = new DenyLink(
      this.lib,
      mechanism ? { mechanism, prog: this.program(DENY_PROGRAMS[mechanism]) } : null,
      this.pinRoot,
      this.logger,
      options.denyUnavailable,
    );
    if (parentHook) this.links.attachParentHook();
    this.links.attachChangeHooks();
  }

  /** The running program's version (its tag), and whether it replaced an earlier agent's. */
  programVersion(): { tag: string; replaced?: ProgramReplaced } {
    const replaced = this.links.programReplaced;
    return {
      tag: programInfo(this.links.trapProgramFd(this.programFd)).tag,
      ...(replaced ? { replaced } : {}),
    };
  }

  /** True when every change hook is attached: deletions, renames and truncations are reported. */
  get changeEvents(): boolean {
    return this.links.allChangeHooks;
  }

  /** Whether this kernel can deny, and whether the deny program is attached now. */
  denyState(): DenyState {
    return (
      this.deny?.state() ?? { available: false, reason: "the kernel program is loaded without attaching" }
    );
  }

  /** The trap-proof maps (trap-proof.ts), owned by this watcher: valid until close(). */
  proofMaps(): ProofMaps {
    return { provers: this.fds.hive_provers, proofs: this.fds.hive_proofs, proving: this.fds.hive_proving };
  }

  sync(entries: readonly WatchEntry[], allow: readonly AllowRule[] = []): SyncResult {
    this.allowMap.remove(allow);
    const result = this.watchMap.sync(entries);
    this.allowMap.add(allow);
    this.deny?.set(entries.some((e) => e.deny !== undefined));
    return result;
  }

  /** What the kernel's allow rules let through since the last call (allow-map.ts). */
  takeAllowed(): AllowedCount[] {
    return this.allowMap.take();
  }

  quiet(cgroupId: bigint, group: number): void {
    this.quietMap.quiet(cgroupId, group);
  }

  clearQuiet(): void {
    this.quietMap.clear();
  }

  /** The quieted (cgroup, group) pairs (quiet-map.ts). */
  quieted(): Array<{ cgroupId: bigint; group: number }> {
    return this.quietMap.entries();
  }

  ancestors(process: ProcessIdentity): Ancestor[] {
    return this.tracking?.ancestors(process) ?? [];
  }

  onEvent(listener: (event: KernelEvent) => void): void {
    this.listeners.push(listener);
    this.consumer?.start();
  }

  holdAcks(): () => void {
    const release = this.consumer?.holdAcks() ?? (() => {});
    this.consumer?.start();
    return release;
  }

  counters(): LibbpfCounters {
    const total = readCounters(this.fds.hive_counters, this.ncpus);
    return {
      ...total,
      watched: this.watchMap.size,
      notWatched: this.watchMap.notWatched,
      delivered: deliveredBy(this.consumer),
      consumerRestarts: this.consumer?.restarts ?? 0,
      programMisses: this.links.programMisses(this.programFd),
      upgradeDiscarded: this.upgradeDiscarded,
      program: {
        tag: this.programVersion().tag,
        attachMode: this.attachMode,
        ...(this.links.programReplaced ? { replacedFrom: this.links.programReplaced.from } : {}),
      },
      ringUsedBytes: this.consumer?.ringUsedBytes() ?? 0,
      ringHeld: this.consumer?.held ?? false,
      ringPaused: this.consumer?.paused ?? false,
    };
  }

  /** Handled events keep their ring space until `gate` says their alerts are durable (RingGate). */
  gateRelease(gate: RingGate | undefined): void {
    this.consumer?.setGate(gate);
  }

  /**
   * The flood sweeps and the ring's consumer. The ring is read from the first listener, hold,
   * wait or flush on: an earlier agent's backlog then reaches the listeners, under the holds
   * and the gate set in that turn.
   */
  private openDelivery(options: KernelWatcherOptions): void {
    const { flood, consumer } = startEventDelivery({
      fds: this.fds,
      timing: this.timing,
      adoptedBeforeNs: this.adoptedBeforeNs,
      keyOfSlot: (slot) => this.watchMap.keyOfSlot(slot),
      listeners: this.listeners,
      options,
      logger: this.logger,
    });
    this.flood = flood;
    this.consumer = consumer;
  }

  /** Not ok while no drain reads the ring buffer (a failed one is being replaced). */
  health(): { ok: boolean; message?: string } {
    const message = this.links.missingMessage();
    return message !== undefined ? { ok: false, message } : (this.consumer?.health() ?? { ok: true });
  }

  /** Resolves once the ring-buffer consumer runs (events before that wait in the ring buffer). */
  whenReady(): Promise<void> {
    this.consumer?.start();
    return this.consumer?.whenReady() ?? Promise.resolve();
  }

  /** Waits until what the kernel opened so far is delivered (waitDelivered). For tests and shutdown. */
  async flush(timeoutMs = 5000): Promise<boolean> {
    await this.whenReady();
    const { fds, ncpus, timing, deliveredBase: base, consumer } = this;
    return waitDelivered({ countersFd: fds.hive_counters, ncpus, timing, base, consumer }, timeoutMs);
  }

  async close(options: { keepPinned?: boolean } = {}): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.flood?.stopSweeps();
    await this.consumer?.stop();
    const keep = options.keepPinned === true && this.pinRoot !== null;
    this.tracking?.close(keep);
    this.deny?.close({ detach: !keep });
    this.links.release(keep);
    if (!keep && this.pinRoot) unpinAll(this.lib, this.maps, this.pinRoot, PROGRAM_PIN);
    this.lib.bpf_object__close(this.obj);
    if (!keep && this.pinRoot) removeEmptyPinRoot(this.pinRoot);
  }
}
