/**
 * What the rest of the agent needs from the kernel path, and nothing more. The libbpf
 * loader (runtime/kernel/loader.ts) implements it; the loader controller and standalone
 * mode consume it. Kept small so controllers can be exercised against any implementation
 * of the same contract (e.g. a loader running in a test VM) without reaching into libbpf.
 */

import type { ExeSource, FileChange } from "../../api/alert.ts";
import type { AccessKind } from "../../api/meta.ts";
import type { DenyMechanism } from "./deny-mechanism.ts";
import type { ProofMaps } from "./trap-proof.ts";

/**
 * How the program is attached to inode_permission (runtime/kernel/attach.ts says when each
 * is used): a kprobe.multi link, a BPF trampoline, or a perf-event kprobe.
 */
export const ATTACH_MODES = ["kprobe.multi", "fentry", "kprobe"] as const;
export type AttachMode = (typeof ATTACH_MODES)[number];
/** What a user may ask for: a mode, or "auto" (the least-privileged mode that attaches). */
export const ATTACH_REQUESTS = ["auto", ...ATTACH_MODES] as const;
export type AttachRequest = (typeof ATTACH_REQUESTS)[number];

/** Identifies a file the way the kernel does: superblock device (major:minor) + inode number. */
export interface FileKey {
  major: number;
  minor: number;
  ino: bigint;
}

/**
 * One entry of the kernel's watch map. `slot` is chosen by user space and comes back in
 * every event, so an event maps to its HiveData without a lookup by inode.
 * `kind: "parent"` watches a trapped file's directory for entry changes (rename over,
 * unlink, create): the kernel reports those as control events so the agent re-resolves
 * the path instead of polling.
 */
export type DenyState =
  | { available: true; attached: boolean; mechanism: DenyMechanism }
  | { available: false; reason: string };

export interface WatchEntry {
  key: FileKey;
  slot: number;
  accesses: readonly AccessKind[];
  kind: "file" | "parent";
  /**
   * Entries with the same non-zero group fold into one burst when one thread checks them in turn:
   * a container's overlay inode and the image layer's file beneath it, which one access checks both.
   */
  group?: number;
  /**
   * A file entry also reports its changes (deleted, renamed away, replaced, truncated) on its
   * slot, whatever `accesses` says (bpf/hive.h HIVE_CHANGE_*). Off when absent.
   */
  changes?: boolean;
  /**
   * The kernel refuses this file's accesses of the wanted kinds (EACCES), or with "dryRun" only
   * marks them (bpf/hive.bpf.c hive_deny). Only for a container's own file, never an image
   * layer's (which every container of the image shares).
   */
  deny?: "deny" | "dryRun";
  /**
   * The kernel decides this file's trap's allow entries (AllowRule keys of this slot are written
   * first); `parent`: some of them name a `parent-exe`. An allowed check is counted, never an event.
   */
  allow?: { parent: boolean };
}

/**
 * One key of the kernel's allow map (bpf/hive.h struct hive_allow_key, hive_allow): an executable
 * a trap's allow entries name, as discover found it at the entry's exact path in the container of
 * watch slot `slot`, and the trap's entries as the kernel decides them (bit i: entry i).
 */
export interface AllowRule {
  slot: number;
  /** The executable's identity as the kernel records it at exec (the container's overlay inode). */
  file: FileKey;
  /** Entries whose `exe` is this file, and whose `parent-exe` is. */
  exe: number;
  parent: number;
  /** Entries that name an `exe`, a `parent-exe`; entries the kernel decides (exact paths only). */
  needsExe: number;
  needsParent: number;
  decided: number;
  /** A host path's trap (standalone): the host's own files count, the root is not checked. */
  host: boolean;
  /** Entry i's `accesses` as MAY_* bits (access-bits.ts), or ALLOW_ANY (map-layouts.ts) without. */
  kinds: readonly number[];
}

/** What the kernel allowed through one allow key: checks per entry (since the last take). */
export interface AllowedCount {
  slot: number;
  file: FileKey;
  counts: readonly bigint[];
}

/**
 * A process's executable as the kernel recorded it (bpf/hive.bpf.c tracks exec and fork):
 * never read from /proc after the fact, so a short-lived process keeps it and a later exec
 * cannot change it. `exe` is absent when `source` is "unknown".
 */
export interface ExecIdentity {
  exe?: string;
  source: ExeSource;
  /** The path did not fit the kernel's buffer: `exe` is its end; no allowlist may match it. */
  truncated?: boolean;
}

/**
 * Which file a process runs and what may run in it besides, as the kernel recorded at its
 * exec (bpf/hive.h HIVE_EXE_*): what an allow entry holds on (runtime/alerts/allowlist.ts).
 */
export interface ExecProvenance {
  /** The executable's file as the kernel checks it (an overlay's own inode); ino 0 when unknown. */
  file: FileKey;
  /**
   * `image`: an overlay's file with no upper copy (an image layer's, unchanged);
   * `container`: in an overlay's upper layer (written or changed in the container);
   * `unlinked`: a memfd or a deleted file; `other`: another filesystem (a volume, the host).
   */
  layer: ExeLayer;
  /** Dynamic-loader variables set in the environment at exec. */
  loaderEnv: LoaderEnvVar[];
  /** The environment at exec was not read whole (or the process predates the program). */
  envUnread: boolean;
  /** Traced (ptrace) at its exec or at an access since. */
  traced: boolean;
  /** The fork that made the process was not seen: who spawned it is unknown. */
  forkUnseen: boolean;
}

export type ExeLayer = "image" | "container" | "unlinked" | "other";
export const LOADER_ENV_VARS = ["LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH"] as const;
export type LoaderEnvVar = (typeof LOADER_ENV_VARS)[number];

/** A process above the parent (KernelWatcher.ancestors). */
export interface Ancestor {
  pid: number;
  exe: ExecIdentity;
}

/** The accessing process, as the kernel knew it at the access. */
export interface ProcessIdentity {
  exe: ExecIdentity;
  /** Which file ran (absent for an event from a kernel program that does not record it). */
  provenance?: ExecProvenance;
  /** The process's root is a directory inside a mount (a chroot), not its mount's root. */
  chroot?: boolean;
  /** The device of the process's root directory (a container's: its overlay). */
  rootDev?: { major: number; minor: number };
  /** CLOCK_MONOTONIC ns of the exec (process start when seeded); 0 when unknown. */
  execNs: bigint;
  /** Process id inside its own pid namespace. */
  nsPid?: number;
  ppid?: number;
  parent?: {
    pid: number;
    comm?: string;
    exe: ExecIdentity;
    provenance?: ExecProvenance;
    chroot?: boolean;
    /** The parent ran another executable since it forked this process. */
    execedSinceFork?: boolean;
    /** The parent is not the process that forked this one (it was orphaned and adopted). */
    reparented?: boolean;
  };
  /**
   * The parent's parent as the kernel knew it at the access (tgid and start time): where the
   * ancestry starts in the kernel's process map, even when the parent has exited since.
   */
  grandparent?: { pid: number; startNs: bigint };
}

/** One access burst, decoded from the kernel event struct (bpf/hive.h). */
/** A cgroup as the kernel named it at an access: its directory, its parent's, its depth below the root. */
export interface CgroupNames {
  name: string;
  parent: string;
  level: number;
}

export interface KernelEvent {
  /** CLOCK_MONOTONIC ns of the burst's first check (bpf_ktime_get_ns). */
  ktimeNs: bigint;
  key: FileKey;
  /** Union of the MAY_* masks seen in the burst. */
  mask: number;
  accesses: AccessKind[];
  /**
   * A change of the file seen in the burst (the unlink, rename and truncate hooks): the file's
   * name is gone or now names another file (deleted, renamed, replaced: its trap must be resolved
   * again), or its data was cut (truncated).
   */
  change?: FileChange;
  /**
   * A denying entry's outcome (WatchEntry.deny): the kernel refused the access (EACCES), or a dry
   * run would have. Absent on other entries, and on a denying one whose access was not refused.
   */
  deny?: "denied" | "dryRun";
  kind: "file" | "parent";
  /**
   * On a file the kernel armed itself when it was renamed over a trapped file (it took the
   * trapped name): its key is not one user space armed; `slot` is the replaced file's.
   */
  followed?: boolean;
  slot: number;
  /**
   * The first check's entry group (WatchEntry.group), absent when 0. On an image layer's own
   * entry it equals `slot`: what KernelWatcher.quiet is keyed by.
   */
  group?: number;
  pid: number;
  tgid: number;
  uid: number;
  gid: number;
  comm: string;
  cgroupId: bigint;
  /**
   * An image layer's group only: the names of the task's cgroup directory and its parent at the
   * access. A one-shot container's cgroup is gone before the event is read; these still name it.
   */
  cgroupNames?: CgroupNames;
  /** inode_permission calls collapsed into this event. */
  count: number;
  process: ProcessIdentity;
  /**
   * The cumulative held counts of this burst's flood key (its trapped file, cgroup, executable
   * and what an allow decision reads of the process) as the kernel wrote them: what flood-summaries.ts turns into `summarized`.
   */
  heldTotal?: { bursts: bigint; checks: bigint };
  /**
   * Bursts of the same trapped file, container and executable that the kernel held since the
   * previous event of theirs (a flood, summarised before the ring buffer), and their checks.
   */
  summarized?: { bursts: number; checks: number };
}

/**
 * What the alerts of handled events need from the ring (the alert pipeline's spool): their
 * events keep their ring space until each alert is on disk or decided, and reading stops while
 * no more alerts can wait in memory.
 */
export interface RingGate {
  /** True while alerts of handled events are neither written nor delivered: nothing is released. */
  holding(): boolean;
  /** True while no more alerts can wait: nothing more is read and events wait in the ring. */
  full(): boolean;
}

export interface KernelCounters {
  events: bigint;
  /** Events that could not be reserved in the ring buffer (lost, and counted). */
  lost: bigint;
  watched: number;
  /** Entries of the last sync the watch map had no room for (not watched until room is made). */
  notWatched?: number;
}

/** What a sync could not do. */
export interface SyncResult {
  /** Entries the kernel map had no room for: not watched, and to be reported as such. */
  notWatched: readonly WatchEntry[];
}

export interface KernelWatcher {
  readonly attachMode: AttachMode;
  /** Why this attach mode was used (logged at start, shown by `hive status`). */
  readonly attachReason?: string;
  /**
   * Make the kernel map equal to `entries` (a diff: only changed keys are written). Removals
   * come first, so a full map recovers as soon as entries go; what still does not fit is
   * returned, never thrown. The allow map is made equal to `allow` around it: keys not wanted go
   * before the entries change, new keys come after, so no key is read with another slot's trap.
   */
  sync(entries: readonly WatchEntry[], allow?: readonly AllowRule[]): SyncResult;
  /**
   * Events are delivered on Node's event loop; consumption never blocks it. An event is read in
   * place from the batch it came in: a listener that keeps it beyond the call keeps
   * `retainedEvent(event)` (event-decode.ts), which holds its own 896 bytes, not the batch.
   */
  onEvent(listener: (event: KernelEvent) => void): void;
  /**
   * Defers consuming delivered events until the returned release is called: they stay in the
   * kernel's buffers meanwhile (bounded there, overflow counted lost), so that a process
   * killed before the release leaves them to the next agent.
   */
  holdAcks?(): () => void;
  /**
   * From now on, handled events keep their ring space until `gate` says what was made of them
   * is durable or decided, and reading pauses while it is full (ring-consumer.ts RingGate).
   */
  gateRelease?(gate: RingGate | undefined): void;
  /**
   * The parent's ancestors, nearest first (at most api/alert.ts MAX_ANCESTORS), from the
   * kernel's process map: asked only for accesses that become alerts.
   */
  ancestors?(process: ProcessIdentity): Ancestor[];
  counters(): KernelCounters;
  /**
   * Accesses from cgroup `cgroupId` to the image layer's entry of `group` alert nobody: the kernel
   * skips them from now on (no burst, no event; counted) until clearQuiet. Only for an access
   * dropped because no trap selects its container, never for one not yet attributable.
   */
  /** Whether this kernel can deny (bpf/hive.bpf.c hive_deny), and whether it does now. */
  denyState?(): DenyState;
  /** The checks the kernel allowed since the last call, per allow key (allow-map.ts take). */
  takeAllowed?(): AllowedCount[];
  quiet?(cgroupId: bigint, group: number): void;
  /** Forgets every quieted cgroup: called whenever what selects an access could have changed. */
  clearQuiet?(): void;
  /**
   * Descriptors of the maps a resolving thread proves traps with (runtime/kernel/trap-proof.ts);
   * absent where no kernel program is loaded.
   */
  proofMaps?(): ProofMaps;
  /** Not ok while events are not being read (e.g. a failed ring drain being replaced). */
  health?(): { ok: boolean; message?: string };
  /** `keepPinned: true` leaves maps/links pinned for the next agent to adopt. */
  close(options?: { keepPinned?: boolean }): Promise<void>;
}
