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
import { eventFields } from "./event-decode.ts";
import { FLOOD_KEY_LAYOUT, FLOOD_LAYOUT, floodKeyOfMapKey, keyFromKernelDev } from "./layout.ts";
import { forEachMapEntry, libbpf } from "./libbpf-ffi.ts";

/**
 * Last events remembered (a few MiB at most); reported counts are kept for every key the kernel
 * map holds (16,384). A summary of a key whose last event was forgotten names no process, but
 * still its file, container and counts.
 */
const MAX_LAST_EVENTS = 4_096;
/** A fully reported key idle this long is removed from the kernel map (and forgotten here). */
const IDLE_REMOVE_NS = 60_000_000_000n;

interface Reported {
  bursts: bigint;
  checks: bigint;
}

export class FloodSummaries {
  private readonly reported = new Map<string, Reported>();
  private readonly lastEvents = new Map<string, KernelEvent>();
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

  /** Sets `summarized` on an event from the ring buffer (bursts held since the key's previous event). */
  annotate(event: KernelEvent): void {
    if (event.kind !== "file" || event.heldTotal === undefined || event.floodKey === undefined) return;
    const key = event.floodKey;
    this.rememberLast(key, event);
    const seen = this.reported.get(key);
    const { bursts, checks } = event.heldTotal;
    // A swept burst (never emitted by the kernel) carries zeros: it reports nothing new.
    if (seen && bursts === 0n && checks === 0n) return;
    const delta = seen && bursts >= seen.bursts ? bursts - seen.bursts : bursts;
    const deltaChecks = seen && checks >= seen.checks ? checks - seen.checks : checks;
    if (delta > 0n) event.summarized = { bursts: Number(delta), checks: Number(deltaChecks) };
    this.reported.set(key, { bursts, checks });
  }

  /**
   * Summary events for keys the kernel held bursts of that no event has reported yet and that
   * have been quiet for a window (their flood stopped). Removes long-idle, fully reported keys.
   */
  sweep(nowNs: bigint): KernelEvent[] {
    const out: KernelEvent[] = [];
    const idle: Buffer[] = [];
    forEachMapEntry(this.floodFd, FLOOD_KEY_LAYOUT.size, FLOOD_LAYOUT.size, (k, v) => {
      const cgroup = k.readBigUInt64LE(FLOOD_KEY_LAYOUT.cgroup_id);
      const file = keyFromKernelDev(
        k.readUInt32LE(FLOOD_KEY_LAYOUT.exe_dev),
        k.readBigUInt64LE(FLOOD_KEY_LAYOUT.exe_ino),
      );
      const slot = k.readUInt32LE(FLOOD_KEY_LAYOUT.slot);
      const bursts = v.readBigUInt64LE(FLOOD_LAYOUT.held_bursts);
      const checks = v.readBigUInt64LE(FLOOD_LAYOUT.held_checks);
      const lastNs = v.readBigUInt64LE(FLOOD_LAYOUT.last_ns);
      const key = floodKeyOfMapKey(k);
      const seen = this.reported.get(key);
      const reported = seen && bursts >= seen.bursts ? seen.bursts : 0n;
      if (bursts > reported && nowNs - lastNs >= this.windowNs) {
        const summary = this.summaryEvent(this.lastEvents.get(key), { cgroup, file, slot, lastNs });
        summary.summarized = {
          bursts: Number(bursts - reported),
          checks: Number(checks - (seen && checks >= seen.checks ? seen.checks : 0n)),
        };
        summary.heldTotal = { bursts, checks };
        this.reported.set(key, { bursts, checks });
        out.push(summary);
      } else if (bursts === reported && nowNs - lastNs >= IDLE_REMOVE_NS) {
        idle.push(Buffer.from(k));
        this.reported.delete(key);
        this.lastEvents.delete(key);
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

  private rememberLast(key: string, event: KernelEvent): void {
    // Set in place (no delete first, as an LRU would): once per event, the cheaper the better. A
    // key evicted while still active is inserted again, as the newest, by its next event.
    this.lastEvents.set(key, event);
    if (this.lastEvents.size > MAX_LAST_EVENTS) {
      const oldest = this.lastEvents.keys().next().value;
      if (oldest !== undefined) this.lastEvents.delete(oldest);
    }
  }
}
