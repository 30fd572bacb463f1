/**
 * Flood summaries, user-space half. The kernel lets each flood key (one executable's accesses to
 * one trapped file from one cgroup, under the same process facts an allow list reads) emit a few bursts per window and holds the rest, counting
 * them in hive_flood (bpf/hive.bpf.c hive_flood_held); an emitted burst carries its key's
 * cumulative held counts. Here they become `summarized` (held since the key's previous event),
 * and a key whose flood stopped with counts still unreported gets one summary event from the
 * sweep: the last event seen of the key, re-dated, with the counts. So a flood costs the ring a
 * handful of events a second, and every held access is still reported.
 */
import type { Logger } from "../log.ts";
import type { FileKey, KernelEvent } from "./contract.ts";
import { decodeEvent, eventFields } from "./event-decode.ts";
import type { RecordBatch } from "./event-record.ts";
import { FloodKeys } from "./flood-keys.ts";
import { EVENT_LAYOUT, FLOOD_KEY_LAYOUT, FLOOD_LAYOUT, hasFloodKey, keyFromKernelDev } from "./layout.ts";
import { forEachMapEntry, libbpf } from "./libbpf-ffi.ts";
import { KIND_PARENT } from "./map-layouts.ts";

/**
 * Recent events kept, in their batches (a few MiB at most), where a summary finds its key's last
 * event; reported counts are kept for every key the kernel map holds (16,384). A summary of a key
 * with no event among them names no process, but still its file, container and counts.
 */
const MAX_RECENT_EVENTS = 4_096;
/** A fully reported key idle this long is removed from the kernel map (and forgotten here). */
const IDLE_REMOVE_NS = 60_000_000_000n;

export class FloodSummaries {
  private readonly keys = new FloodKeys();
  /** The newest batches from the ring, MAX_RECENT_EVENTS events at least (keep). */
  private readonly recent: RecordBatch[] = [];
  private recentEvents = 0;
  private readonly floodFd: number;
  private readonly windowNs: bigint;
  private readonly keyOfSlot: (slot: number) => FileKey | undefined;
  private timer: NodeJS.Timeout | undefined;

  /** `keyOfSlot`: the watched file at a slot, for a summary whose key's last event was forgotten. */
  constructor(
    floodFd: number,
    windowNs: bigint,
    keyOfSlot: (slot: number) => FileKey | undefined = () => undefined,
  ) {
    this.floodFd = floodFd;
    this.windowNs = windowNs;
    this.keyOfSlot = keyOfSlot;
  }

  /**
   * Sweeps once a window, handing each summary to `deliver` (the listeners). process.hrtime is
   * CLOCK_MONOTONIC, the clock of bpf_ktime_get_ns.
   */
  startSweeps(deliver: (event: KernelEvent) => void, logger?: Logger): void {
    this.timer = setInterval(
      () => {
        try {
          for (const event of this.sweep(process.hrtime.bigint())) deliver(event);
        } catch (error) {
          logger?.warn("flood summary sweep failed; retried", { error });
        }
      },
      Number(this.windowNs / 1_000_000n),
    );
    this.timer.unref();
  }

  stopSweeps(): void {
    clearInterval(this.timer);
  }

  /**
   * Sets `summarized` on `event`, read from the ring buffer as the record at `at` in `batch`:
   * the bursts its key held since the key's previous event. Most events carry no held counts
   * (their key never flooded): those are decided on four words, with no lookup of their key.
   */
  annotate(event: KernelEvent, batch: RecordBatch, at: number): void {
    const view = batch.view;
    if (view.getUint32(at + EVENT_LAYOUT.kind, true) === KIND_PARENT) return;
    const zero =
      (view.getUint32(at + EVENT_LAYOUT.held_bursts, true) |
        view.getUint32(at + EVENT_LAYOUT.held_bursts + 4, true) |
        view.getUint32(at + EVENT_LAYOUT.held_checks, true) |
        view.getUint32(at + EVENT_LAYOUT.held_checks + 4, true)) ===
      0;
    // Zeros report nothing new (a swept burst, never emitted by the kernel, carries zeros too).
    if (zero) return;
    const state = this.keys.ofRecord(batch, at);
    const bursts = view.getBigUint64(at + EVENT_LAYOUT.held_bursts, true);
    const checks = view.getBigUint64(at + EVENT_LAYOUT.held_checks, true);
    const seen = state.reported;
    const delta = seen && bursts >= state.reportedBursts ? bursts - state.reportedBursts : bursts;
    const deltaChecks = seen && checks >= state.reportedChecks ? checks - state.reportedChecks : checks;
    if (delta > 0n) event.summarized = { bursts: Number(delta), checks: Number(deltaChecks) };
    state.reportedBursts = bursts;
    state.reportedChecks = checks;
    state.reported = true;
  }

  /**
   * Keeps `batch` among the recent ones, where a summary finds its key's last event: the
   * newest MAX_RECENT_EVENTS events at least, whole batches (no copy per event).
   */
  keep(batch: RecordBatch): void {
    this.recent.push(batch);
    this.recentEvents += batch.offsets.length;
    for (let oldest = this.recent[0]; oldest && oldest !== batch; oldest = this.recent[0]) {
      const oldestCount = oldest.offsets.length;
      if (this.recentEvents - oldestCount < MAX_RECENT_EVENTS) break;
      this.recent.shift();
      this.recentEvents -= oldestCount;
    }
  }

  /** The newest recent event of the hive_flood key `mapKey`, with a record of its own; undefined when none. */
  lastEventOf(mapKey: Buffer): KernelEvent | undefined {
    const key = new DataView(mapKey.buffer, mapKey.byteOffset, mapKey.byteLength);
    for (let b = this.recent.length - 1; b >= 0; b--) {
      const batch = this.recent[b] as RecordBatch;
      for (let i = batch.offsets.length - 1; i >= 0; i--) {
        const at = batch.offsets[i] as number;
        if (batch.view.getUint32(at + EVENT_LAYOUT.kind, true) === KIND_PARENT) continue;
        if (hasFloodKey(batch.view, at, key))
          return decodeEvent(batch.bytes.subarray(at, at + EVENT_LAYOUT.size));
      }
    }
    return undefined;
  }

  /**
   * Summary events for keys the kernel held bursts of that no event has reported yet and that
   * have been quiet for a window (their flood stopped). Removes long-idle, fully reported keys.
   */
  sweep(nowNs: bigint): KernelEvent[] {
    const out: KernelEvent[] = [];
    const idle: Buffer[] = [];
    forEachMapEntry(this.floodFd, FLOOD_KEY_LAYOUT.size, FLOOD_LAYOUT.size, (k, v) => {
      const bursts = v.readBigUInt64LE(FLOOD_LAYOUT.held_bursts);
      const checks = v.readBigUInt64LE(FLOOD_LAYOUT.held_checks);
      const lastNs = v.readBigUInt64LE(FLOOD_LAYOUT.last_ns);
      // Looked up, not made: a key is kept here only once it has something to report.
      const found = this.keys.findMapKey(k);
      const seen = found?.reported === true;
      const reported = found && seen && bursts >= found.reportedBursts ? found.reportedBursts : 0n;
      if (bursts > reported && nowNs - lastNs >= this.windowNs) {
        const state = found ?? this.keys.ofMapKey(k);
        const summary = this.summaryEvent(this.lastEventOf(k), {
          cgroup: k.readBigUInt64LE(FLOOD_KEY_LAYOUT.cgroup_id),
          file: keyFromKernelDev(
            k.readUInt32LE(FLOOD_KEY_LAYOUT.exe_dev),
            k.readBigUInt64LE(FLOOD_KEY_LAYOUT.exe_ino),
          ),
          slot: k.readUInt32LE(FLOOD_KEY_LAYOUT.slot),
          lastNs,
        });
        summary.summarized = {
          bursts: Number(bursts - reported),
          checks: Number(checks - (seen && checks >= state.reportedChecks ? state.reportedChecks : 0n)),
        };
        summary.heldTotal = { bursts, checks };
        state.reportedBursts = bursts;
        state.reportedChecks = checks;
        state.reported = true;
        out.push(summary);
      } else if (bursts === reported && nowNs - lastNs >= IDLE_REMOVE_NS) {
        idle.push(Buffer.from(k));
        this.keys.forget(k);
      }
    });
    const lib = libbpf();
    for (const k of idle) lib.bpf_map_delete_elem(this.floodFd, k);
    return out;
  }

  /** The key's last event re-dated to its last held burst, or, for a key never seen, a bare one. */
  private summaryEvent(
    last: KernelEvent | undefined,
    at: { cgroup: bigint; file: FileKey; slot: number; lastNs: bigint },
  ): KernelEvent {
    if (last) return { ...eventFields(last), ktimeNs: at.lastNs, count: 0 };
    return {
      ktimeNs: at.lastNs,
      // The watched file (routed by it): the key's last event, which named it, was forgotten.
      key: this.keyOfSlot(at.slot) ?? { major: 0, minor: 0, ino: 0n },
      mask: 0,
      accesses: [],
      kind: "file",
      slot: at.slot,
      pid: 0,
      tgid: 0,
      uid: 0,
      gid: 0,
      comm: "",
      cgroupId: at.cgroup,
      count: 0,
      process: {
        exe: { source: "unknown" },
        provenance: {
          file: at.file,
          layer: "other",
          loaderEnv: [],
          envUnread: true,
          traced: false,
          forkUnseen: true,
        },
        execNs: 0n,
      },
    };
  }
}
