/**
 * What a LibbpfKernelWatcher (loader.ts) takes, and the counters it reports beyond the
 * KernelWatcher contract's.
 */

import type { Logger } from "../log.ts";
import type { AttachRequest, KernelCounters } from "./contract.ts";
import type { DenyMechanism } from "./deny-mechanism.ts";

export interface KernelWatcherOptions {
  /** Compiled program; default bpf/hive.bpf.o of this package. */
  objectPath?: string;
  /** Default "auto": the least-privileged mode this kernel can attach (attach.ts). */
  attachMode?: AttachRequest;
  /** false: load (verify) only, attach nothing — for checking a kernel accepts the program. */
  attach?: boolean;
  /** bpffs directory for pinned maps/link; default /sys/fs/bpf/hive; null disables pinning. */
  pinRoot?: string | null;
  /** A burst ends when its thread's next check of the file comes later than this. Default 5 ms. */
  burstGapMs?: number;
  /** A burst never lasts longer than this. Default 250 ms. */
  burstMaxMs?: number;
  /**
   * Flood summarisation (flood-summaries.ts): bursts one executable may emit per window for one
   * trapped file from one cgroup before the rest are held and counted; default 8, 0 turns it off.
   */
  floodBudget?: number;
  /** The flood window; default 1000 ms. */
  floodWindowMs?: number;
  /**
   * The extra hook on security_inode_permission that reports parent-directory changes on
   * kernels whose inode_permission was split by the compiler. "auto" (default) loads it
   * only there; "always" loads it anyway (e.g. to verify it), "never" not at all.
   */
  parentHook?: "auto" | "always" | "never";
  /**
   * Set when the deny program (bpf/hive.bpf.c hive_deny) cannot load here: it is left out and
   * denying traps only alert, for this reason (open-watcher.ts sets it after a load without it).
   */
  denyUnavailable?: string;
  /** How to deny (deny-mechanism.ts): chosen by openKernelWatcher; default fmod_ret. */
  denyMechanism?: DenyMechanism;
  /** The kernel's list of active LSMs (default /sys/kernel/security/lsm): whether the BPF LSM may deny. */
  lsmFile?: string;
  /** How often idle bursts are swept from the kernel map. Default 10 ms. */
  sweepIntervalMs?: number;
  /**
   * Pins of another layout (an agent of another version) are removed and replaced instead of
   * refused. Only for a caller that knows no other loader uses them (the agent holds the
   * node-local loader lock); `hive watch` refuses and says what to remove.
   */
  replaceStalePins?: boolean;
  /**
   * Entries the kernel watch map holds (trapped files and their directories); default
   * 65,536 (bpf/hive.bpf.c). Pins of another capacity are pins of another layout.
   */
  watchCapacity?: number;
  /** Threads with a pending burst the kernel keeps (default 8,192); more are reported unfolded. */
  burstCapacity?: number;
  /**
   * Bytes of the ring buffer (hive_events; a power of 2 and a multiple of the page size; default
   * 16 MiB, bpf/hive.bpf.c): events waiting for the agent, or for the next one across a restart.
   */
  ringBytes?: number;
  /**
   * Events per batch the ring drain hands over (default 256): how late, at most, reading pauses
   * when alerts can wait in memory no more (KernelWatcher.gateRelease).
   */
  maxBatch?: number;
  /**
   * After a batch that was not full, how long the ring drain lets records gather before reading
   * again (default 5 ms): the wakeups per event fall with the rate; a lone event is not delayed.
   */
  coalesceMs?: number;
  logger?: Logger;
}

export interface LibbpfCounters extends KernelCounters {
  /** Checks that matched a watched file and a wanted access kind. */
  checks: bigint;
  /** Bursts the kernel opened; each is delivered, lost, or still pending. */
  bursts: bigint;
  /** Bursts emitted at once because the burst table was full (reported, not folded). */
  unfolded: bigint;
  /** Events delivered to listeners (kernel-emitted + swept, duplicates dropped). */
  delivered: bigint;
  /** Ring drains that failed and were replaced. */
  consumerRestarts: number;
  /** Runs of the hooks the kernel skipped (fentry recursion; kprobes since 6.7): checks never seen. */
  programMisses: bigint;
  /** Events and bursts an earlier agent of another map layout left unread: replaced, counted. */
  upgradeDiscarded: bigint;
  /** The running trap program: its tag, attach mode, and the tag it replaced at start, if any. */
  program: { tag: string; attachMode: string; replacedFrom?: string };
  /** Bytes of the ring buffer not released to the kernel (read and held, or not read yet). */
  ringUsedBytes: number;
  /** The release of handled events is held: their alerts are neither on disk nor delivered. */
  ringHeld: boolean;
  /** Reading is paused: alerts can wait in memory no more. */
  ringPaused: boolean;
  /** Bursts held by flood summarisation: reported as counts on a later event of their key. */
  held: bigint;
  /** Bursts emitted without a flood budget because the flood map was full. */
  floodFull: bigint;
  /** Checks of an image layer's file skipped in the kernel: their cgroup was quieted for its group. */
  quiet: bigint;
  /** Accesses the kernel refused for a denying trap (EACCES). */
  denied: bigint;
  /** Checks an allow entry let through in the kernel (bpf/allow.bpf.h): counted, never an event. */
  allowed: bigint;
}
