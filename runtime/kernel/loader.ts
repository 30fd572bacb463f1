/**
 * The libbpf loader: opens bpf/hive.bpf.o, sets its read-only data for the running
 * kernel, loads it, attaches it the least-privileged way the kernel allows
 * (runtime/kernel/attach.ts), keeps the watch map equal to the desired set by diff, and
 * delivers ring-buffer events from a worker thread. Maps (and the link, where the kernel
 * can pin it) live under a bpffs directory so that a restarted agent adopts them. Which attach
 * mode to open it in is open-watcher.ts's choice.
 */
import { closeSync, existsSync, readdirSync, rmdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { HiveError } from "../../api/errors.ts";
import type { Logger } from "../log.ts";
import { ATTACH_PROGRAMS, CHANGE_HOOKS, type ChangeHook, type KernelFacts, PROGRAM_PIN } from "./attach.ts";
import { DEFAULT_PIN_ROOT, ensureBpffsDir } from "./bpffs.ts";
import {
  type Ancestor,
  ATTACH_MODES,
  type AttachMode,
  type DenyState,
  type KernelEvent,
  type KernelWatcher,
  type ProcessIdentity,
  type RingGate,
  type SyncResult,
  type WatchEntry,
} from "./contract.ts";
import { readCounters } from "./counters.ts";
import { DENY_PROGRAM, DenyLink } from "./deny-link.ts";
import { FloodSummaries } from "./flood-summaries.ts";
import { type InodePermissionSignature, inodePermissionSignature, overlayUpperOffset } from "./kernel-btf.ts";
import { check, checkPointer, libbpf, type Pointer, releaseLink } from "./libbpf-ffi.ts";
import { captureLibbpfLog, clearLibbpfLog, loadError } from "./load-errors.ts";
import { DEFAULT_OBJECT_PATH } from "./object-path.ts";
import { ProcessTracking } from "./process-tracking.ts";
import { programInfo } from "./program-info.ts";
import { QuietMap } from "./quiet-map.ts";
import { RingConsumer } from "./ring-consumer.ts";
import { setRodata } from "./rodata.ts";
import { attachChangeLink, attachParentLink, attachTrapLink } from "./trap-link.ts";
import type { ProofMaps } from "./trap-proof.ts";
import { WatchMap } from "./watch-map.ts";
import type { KernelWatcherOptions, LibbpfCounters } from "./watcher-options.ts";

export { linkPinName } from "./attach.ts";
export { DEFAULT_PIN_ROOT, isOnBpffs } from "./bpffs.ts";
export { DEFAULT_OBJECT_PATH } from "./object-path.ts";

/** hive_watch's max_entries in bpf/hive.bpf.c. */
export const DEFAULT_WATCH_CAPACITY = 65_536;
const PINNED_MAPS = [
  "hive_watch",
  "hive_bitmap",
  "hive_bursts",
  "hive_events",
  "hive_counters",
  "hive_procs",
  "hive_swept",
  "hive_provers",
  "hive_proofs",
  "hive_flood",
  "hive_followed",
  "hive_quiet",
] as const;

export type { KernelWatcherOptions, LibbpfCounters } from "./watcher-options.ts";

/** One attach mode to load and attach, and why it was chosen. */
interface AttachChoice {
  mode: AttachMode;
  reason: string;
  facts: KernelFacts;
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
  /** The parent hook this kernel needs did not attach (readiness says so). */
  private parentHookMissing = false;
  private parentLink: Pointer | null = null;
  /**
   * The change hooks attached (attach.ts CHANGE_HOOKS), by hook name: a trapped file deleted,
   * renamed, replaced or truncated is reported on its own slot. A missing one makes readiness fail.
   */
  private readonly changeLinks = new Map<string, Pointer>();
  private changeHooksMissing: ChangeHook[] = [];
  private tracking: ProcessTracking | null = null;
  /** hive_watch's max_entries. */
  readonly watchCapacity: number;
  /** True when an earlier agent's pinned link was adopted instead of attaching anew. */
  readonly adopted: boolean;
  readonly programFd: number;
  /** The adopted link's program (pinned by the agent that attached it); -1 when it is ours. */
  private runningProgramFd = -1;
  private programReplaced: { from: string; to: string; failed?: string } | undefined;
  /** Events and bursts an earlier agent of another map layout left unread (open-watcher.ts). */
  upgradeDiscarded = 0n;
  private readonly lib = libbpf();
  private readonly obj: Pointer;
  private link: Pointer | null = null;
  /** The deny program's link, attached while an entry denies (deny-link.ts); null when not attaching. */
  private deny: DenyLink | null = null;
  /** The link was attached by this watcher, not adopted from a pin. */
  private ownsLink = false;
  private readonly pinRoot: string | null;
  private readonly fds: Record<(typeof PINNED_MAPS)[number], number>;
  private readonly maps: Record<(typeof PINNED_MAPS)[number], Pointer>;
  private watchMap!: WatchMap;
  private quietMap!: QuietMap;
  private readonly listeners: Array<(event: KernelEvent) => void> = [];
  /** The ring worker's main-thread side; null when loaded without attaching. */
  consumer: RingConsumer | null = null;
  /** Bursts this agent opened and delivered (an adopted backlog excluded). */
  private delivered(): bigint {
    return (this.consumer?.delivered ?? 0n) - (this.consumer?.backlog ?? 0n);
  }
  /** Bursts opened before this agent started (adopted maps), not this agent's to deliver. */
  private deliveredBase = 0n;
  private readonly floodWindowNs: bigint;
  private flood: FloodSummaries | undefined;
  private adoptedBeforeNs = 0n;
  private readonly ncpus: number;
  private readonly logger: Logger | undefined;
  private readonly facts: KernelFacts;
  /** The burst and sweep options with their defaults, resolved once. */
  private readonly burstGapNs: bigint;
  private readonly burstMaxNs: bigint;
  private readonly sweepIntervalMs: number;
  private closed = false;

  /** Use openKernelWatcher, which picks the attach mode. */
  constructor(options: KernelWatcherOptions, choice: AttachChoice) {
    this.logger = options.logger;
    this.burstGapNs = nanoseconds(options.burstGapMs ?? 5);
    this.burstMaxNs = nanoseconds(options.burstMaxMs ?? 250);
    this.floodWindowNs = nanoseconds(options.floodWindowMs ?? 1000);
    this.sweepIntervalMs = options.sweepIntervalMs ?? 10;
    this.attachMode = choice.mode;
    this.attachReason = choice.reason;
    this.facts = choice.facts;
    this.pinRoot = options.pinRoot === undefined ? DEFAULT_PIN_ROOT : options.pinRoot;
    const objectPath = options.objectPath ?? DEFAULT_OBJECT_PATH;
    if (!existsSync(objectPath)) {
      throw new HiveError("BpfObjectMissing", "the compiled BPF program is missing", {
        object: objectPath,
        hint: "build it with `sh bpf/build.sh` (needs clang)",
      });
    }
    this.signature = inodePermissionSignature();
    const split = this.signature.inodeArg === 0 && this.facts.splitInodePermission;
    const parentHook = options.parentHook ?? "auto";
    const loadParentHook = parentHook === "always" || (parentHook === "auto" && split);
    captureLibbpfLog();
    this.ncpus = this.lib.libbpf_num_possible_cpus() as number;

    this.obj = checkPointer(
      this.lib.bpf_object__open_file(objectPath, null) as Pointer | null,
      "opening the BPF object",
      {
        object: objectPath,
        code: "BpfObjectMissing",
      },
    );
    try {
      for (const mode of ATTACH_MODES) {
        const { trap, parent } = ATTACH_PROGRAMS[mode];
        this.setAutoload(trap, mode === this.attachMode);
        this.setAutoload(parent, mode === this.attachMode && loadParentHook);
        for (const hook of CHANGE_HOOKS) this.setAutoload(hook.programs[mode], mode === this.attachMode);
      }
      this.setAutoload(DENY_PROGRAM, options.denyUnavailable === undefined);
      setRodata(this.obj, {
        hive_inode_arg: this.signature.inodeArg,
        hive_truncate_arg: this.signature.truncateDentryArg,
        hive_burst_gap_ns: this.burstGapNs,
        hive_burst_max_ns: this.burstMaxNs,
        hive_ovl_upper_off: overlayUpperOffset(),
        hive_flood_budget: options.floodBudget ?? 8,
        hive_flood_window_ns: this.floodWindowNs,
      });
      const maps = {} as Record<(typeof PINNED_MAPS)[number], Pointer>;
      for (const name of PINNED_MAPS) {
        maps[name] = checkPointer(
          this.lib.bpf_object__find_map_by_name(this.obj, name) as Pointer | null,
          "finding map",
          { object: name },
        );
      }
      this.maps = maps;
      this.watchCapacity = options.watchCapacity ?? DEFAULT_WATCH_CAPACITY;
      const sizes: Array<[Pointer, number | undefined, string]> = [
        [maps.hive_watch, options.watchCapacity, "hive_watch"],
        [maps.hive_bursts, options.burstCapacity, "hive_bursts"],
      ];
      for (const [map, entries, name] of sizes) {
        if (entries === undefined) continue;
        check(this.lib.bpf_map__set_max_entries(map, entries) as number, "sizing a map", { object: name });
      }
      if (this.pinRoot) {
        ensureBpffsDir(this.pinRoot);
        for (const name of PINNED_MAPS) {
          check(
            this.lib.bpf_map__set_pin_path(maps[name], join(this.pinRoot, name)) as number,
            "bpf_map__set_pin_path",
            { object: name },
          );
        }
      }
      clearLibbpfLog();
      const loaded = this.lib.bpf_object__load(this.obj) as number;
      if (loaded < 0) throw loadError(-loaded, objectPath, this.attachMode, this.facts);
      const prog = this.program(ATTACH_PROGRAMS[this.attachMode].trap);
      this.programFd = check(this.lib.bpf_program__fd(prog) as number, "bpf_program__fd");
      const fds = {} as Record<(typeof PINNED_MAPS)[number], number>;
      for (const name of PINNED_MAPS)
        fds[name] = check(this.lib.bpf_map__fd(maps[name]) as number, "bpf_map__fd", { object: name });
      this.fds = fds;
      this.watchMap = new WatchMap(
        this.lib,
        { watch: fds.hive_watch, bitmap: fds.hive_bitmap, followed: fds.hive_followed },
        this.watchCapacity,
        this.logger,
      );
      this.quietMap = new QuietMap(this.lib, fds.hive_quiet, this.logger);
      // Keyed by groups of the previous agent's slot numbering, if adopted: none may outlive it.
      this.quietMap.clear();
      const before = readCounters(this.fds.hive_counters, this.ncpus);
      this.deliveredBase = before.bursts - before.lost - before.held;
      // Read after the counters: a burst opened in between counts as backlog, so flush() may
      // wait longer, never return before this agent's own bursts are delivered.
      this.adoptedBeforeNs = process.hrtime.bigint();
      if (options.attach !== false) {
        // Before the trap: an access is then never reported by a process the kernel has not seen.
        this.tracking = new ProcessTracking(
          this.lib,
          (name) => this.program(name),
          this.pinRoot,
          fds.hive_procs,
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
      this.adopted = options.attach === false ? false : this.attach(prog);
      if (options.attach !== false)
        this.deny = new DenyLink(
          this.lib,
          options.denyUnavailable === undefined ? this.program(DENY_PROGRAM) : null,
          this.pinRoot,
          this.logger,
          options.denyUnavailable,
        );
      if (options.attach !== false && split && loadParentHook) this.attachParentHook();
      if (options.attach !== false) this.attachChangeHooks();
      this.parentEvents = !split || this.parentLink !== null;
      this.parentHookMissing =
        options.attach !== false && split && loadParentHook && this.parentLink === null;
      if (!this.parentEvents && options.attach !== false) {
        this.logger?.warn("parent watches are inert on this kernel (inode_permission is split)", {
          symbol: "inode_permission.part.0",
        });
      }
    } catch (error) {
      // A link attached before a later step failed must not stay behind, reporting into
      // maps nobody reads (and, with another mode attached next, reporting twice).
      for (const link of this.changeLinks.values()) {
        if (this.pinRoot) this.lib.bpf_link__unpin(link);
        this.lib.bpf_link__destroy(link);
      }
      if (this.link && this.ownsLink) {
        if (this.pinRoot) this.lib.bpf_link__unpin(this.link);
        this.lib.bpf_link__destroy(this.link);
      }
      this.tracking?.close(false);
      this.deny?.close({ detach: false });
      this.lib.bpf_object__close(this.obj);
      throw error;
    }
    if (options.attach !== false) this.startWorker(options);
  }

  private program(name: string): Pointer {
    return checkPointer(
      this.lib.bpf_object__find_program_by_name(this.obj, name) as Pointer | null,
      "finding program",
      { object: name, code: "BpfObjectMissing" },
    );
  }

  private setAutoload(name: string, load: boolean): void {
    check(
      this.lib.bpf_program__set_autoload(this.program(name), load) as number,
      "bpf_program__set_autoload",
      {
        object: name,
      },
    );
  }

  /** Attaches the trap program, or adopts (or replaces) what an earlier agent pinned. True when adopted. */
  private attach(prog: Pointer): boolean {
    const trap = attachTrapLink({
      lib: this.lib,
      mode: this.attachMode,
      pinRoot: this.pinRoot,
      prog,
      programFd: this.programFd,
      facts: this.facts,
      logger: this.logger,
    });
    this.link = trap.link;
    this.ownsLink = trap.owned;
    this.runningProgramFd = trap.runningProgramFd;
    this.programReplaced = trap.replaced;
    return trap.adopted;
  }

  /** The running program's version (its tag), and whether it replaced an earlier agent's. */
  programVersion(): { tag: string; replaced?: { from: string; to: string; failed?: string } } {
    const fd = this.runningProgramFd >= 0 ? this.runningProgramFd : this.programFd;
    return { tag: programInfo(fd).tag, ...(this.programReplaced ? { replaced: this.programReplaced } : {}) };
  }

  private attachParentHook(): void {
    this.parentLink = attachParentLink({
      lib: this.lib,
      mode: this.attachMode,
      pinRoot: this.pinRoot,
      prog: this.program(ATTACH_PROGRAMS[this.attachMode].parent),
      logger: this.logger,
    });
  }

  private attachChangeHooks(): void {
    for (const hook of CHANGE_HOOKS) {
      const link = attachChangeLink(
        {
          lib: this.lib,
          mode: this.attachMode,
          pinRoot: this.pinRoot,
          prog: this.program(hook.programs[this.attachMode]),
          logger: this.logger,
        },
        hook,
      );
      if (link) this.changeLinks.set(hook.name, link);
      else this.changeHooksMissing.push(hook);
    }
  }

  /** True when every change hook is attached: deletions, renames and truncations are reported. */
  get changeEvents(): boolean {
    return this.changeLinks.size === CHANGE_HOOKS.length;
  }

  /** Whether this kernel can deny, and whether the deny program is attached now. */
  denyState(): DenyState {
    return (
      this.deny?.state() ?? { available: false, reason: "the kernel program is loaded without attaching" }
    );
  }

  /** The trap-proof maps (trap-proof.ts), owned by this watcher: valid until close(). */
  proofMaps(): ProofMaps {
    return { provers: this.fds.hive_provers, proofs: this.fds.hive_proofs };
  }

  sync(entries: readonly WatchEntry[]): SyncResult {
    const result = this.watchMap.sync(entries);
    this.deny?.set(entries.some((e) => e.deny !== undefined));
    return result;
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
  }

  holdAcks(): () => void {
    return this.consumer?.holdAcks() ?? (() => {});
  }

  counters(): LibbpfCounters {
    const total = readCounters(this.fds.hive_counters, this.ncpus);
    return {
      ...total,
      watched: this.watchMap.size,
      notWatched: this.watchMap.notWatched,
      delivered: this.delivered(),
      inFlightPeak: this.consumer?.inFlightPeak ?? 0,
      consumerRestarts: this.consumer?.restarts ?? 0,
      programMisses: this.programMisses(),
      upgradeDiscarded: this.upgradeDiscarded,
      program: {
        tag: this.programVersion().tag,
        attachMode: this.attachMode,
        ...(this.programReplaced ? { replacedFrom: this.programReplaced.from } : {}),
      },
      ringUsedBytes: this.consumer?.ringUsedBytes() ?? 0,
      ringHeld: this.consumer?.held ?? false,
      ringPaused: this.consumer?.paused ?? false,
    };
  }

  /** Runs of the trap and parent programs the kernel skipped (recursion; kprobes since 6.7). */
  private programMisses(): bigint {
    let total = 0n;
    const trap = this.runningProgramFd >= 0 ? this.runningProgramFd : this.programFd;
    total += programInfo(trap).misses ?? 0n;
    if (this.parentLink) {
      const fd = this.lib.bpf_program__fd(this.program(ATTACH_PROGRAMS[this.attachMode].parent)) as number;
      total += programInfo(fd).misses ?? 0n;
    }
    for (const hook of CHANGE_HOOKS) {
      if (!this.changeLinks.has(hook.name)) continue;
      const fd = this.lib.bpf_program__fd(this.program(hook.programs[this.attachMode])) as number;
      total += programInfo(fd).misses ?? 0n;
    }
    return total;
  }

  /** Handled events keep their ring space until `gate` says their alerts are durable (RingGate). */
  gateRelease(gate: RingGate | undefined): void {
    this.consumer?.setGate(gate);
  }

  private startWorker(options: KernelWatcherOptions): void {
    const deliver = (event: KernelEvent) => {
      for (const listener of this.listeners) listener(event);
    };
    const flood = new FloodSummaries(this.fds.hive_flood, this.floodWindowNs, (slot) =>
      this.watchMap.keyOfSlot(slot),
    );
    flood.startSweeps(deliver, this.logger);
    this.flood = flood;
    this.consumer = new RingConsumer({
      data: {
        eventsFd: this.fds.hive_events,
        burstsFd: this.fds.hive_bursts,
        sweptFd: this.fds.hive_swept,
        countersFd: this.fds.hive_counters,
        burstGapNs: this.burstGapNs,
        burstMaxNs: this.burstMaxNs,
        sweepIntervalMs: this.sweepIntervalMs,
        adoptedBeforeNs: this.adoptedBeforeNs,
      },
      ...(options.maxInFlight !== undefined ? { maxInFlight: options.maxInFlight } : {}),
      ...(options.maxBatch !== undefined ? { maxBatch: options.maxBatch } : {}),
      onEvent: (event) => {
        flood.annotate(event);
        deliver(event);
      },
      logger: this.logger,
    });
  }

  /** Not ok while no worker reads the ring buffer (a dead one is being replaced). */
  health(): { ok: boolean; message?: string } {
    if (this.parentHookMissing)
      return {
        ok: false,
        message:
          "the parent-directory hook did not attach: a trapped file replaced or renamed is noticed only when its trap is resolved again",
      };
    if (this.changeHooksMissing.length > 0)
      return {
        ok: false,
        message: this.changeHooksMissing
          .map((hook) => `the hook on ${hook.symbol} did not attach: ${hook.without}`)
          .join("; "),
      };
    return this.consumer?.health() ?? { ok: true };
  }

  /** Resolves once the ring-buffer consumer runs (events before that wait in the ring buffer). */
  whenReady(): Promise<void> {
    return this.consumer?.whenReady() ?? Promise.resolve();
  }

  /**
   * Waits until every burst the kernel opened so far is delivered or counted lost (idle
   * bursts are swept after 2× the gap), or `timeoutMs` passes. For tests and shutdown.
   */
  async flush(timeoutMs = 5000): Promise<void> {
    await this.whenReady();
    const deadline = Date.now() + timeoutMs;
    const settleMs = (Number(this.burstGapNs) / 1e6) * 2 + this.sweepIntervalMs * 2;
    await new Promise((resolve) => setTimeout(resolve, settleMs));
    while (Date.now() < deadline) {
      const { bursts, lost, held } = readCounters(this.fds.hive_counters, this.ncpus);
      if (this.delivered() + lost + held >= bursts - this.deliveredBase) return;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  async close(options: { keepPinned?: boolean } = {}): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.flood?.stopSweeps();
    await this.consumer?.stop();
    const keep = options.keepPinned === true && this.pinRoot !== null;
    this.tracking?.close(keep);
    this.deny?.close({ detach: !keep });
    for (const link of [this.parentLink, ...this.changeLinks.values(), this.link])
      if (link) releaseLink(this.lib, link, keep);
    if (this.runningProgramFd >= 0) closeSync(this.runningProgramFd);
    if (!keep && this.pinRoot) {
      for (const name of PINNED_MAPS) this.lib.bpf_map__unpin(this.maps[name], null);
      rmSync(join(this.pinRoot, PROGRAM_PIN), { force: true });
    }
    this.lib.bpf_object__close(this.obj);
    if (!keep && this.pinRoot && existsSync(this.pinRoot) && readdirSync(this.pinRoot).length === 0) {
      rmdirSync(this.pinRoot);
    }
  }
}

function nanoseconds(ms: number): bigint {
  return BigInt(Math.round(ms * 1e6));
}
