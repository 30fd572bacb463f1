/**
 * Ends idle bursts for the ring drain (ring-drain.ts): a burst stays pending in hive_bursts
 * until its thread next hits a watched file, so bursts idle for longer than the gap are read
 * from the map and posted, and marked in the pinned hive_swept map so that neither the kernel
 * nor a later agent delivers them again. A burst the kernel emitted while the mark was being
 * written is recognised here as a duplicate.
 */
import type { BurstIdentity } from "./event-record.ts";
import { COUNTERS_LAYOUT, decodeBurstTimes, EVENT_LAYOUT } from "./layout.ts";
import { forEachMapEntry, type Libbpf } from "./libbpf-ffi.ts";
import type { RingBatch } from "./ring-batch.ts";
import type { RingDrainData } from "./ring-drain.ts";

/** Entries per bpf_map_lookup_batch call. */
const BATCH = 1024;
/** Sweep marks kept (bounded memory): older ones' kernel copies are long consumed. */
const MAX_MARKS = 4 * 8192;

type SweepData = Pick<
  RingDrainData,
  | "burstsFd"
  | "sweptFd"
  | "countersFd"
  | "burstGapNs"
  | "burstMaxNs"
  | "sweepIntervalMs"
  | "maxBatch"
  | "adoptedBeforeNs"
>;

export class BurstSweeper {
  private readonly lib: Libbpf;
  private readonly data: SweepData;
  private readonly ncpus: number;
  /**
   * Bursts posted by a sweep, by thread id → first-check time; from the kernel's record first,
   * so that a restarted agent does not deliver again what its predecessor swept.
   */
  // First-check times as two words: the ring drain compares every record of a swept thread
  // with its mark, and a BigInt per record would be garbage per record.
  private readonly delivered = new Map<number, TimeWords>();
  private readonly sweptKey = Buffer.alloc(4);
  private readonly sweptValue = Buffer.alloc(8);
  private readonly counterBuf: Buffer;
  private readonly zeroKey = Buffer.alloc(4);
  private readonly batchKeys = Buffer.alloc(BATCH * 4);
  private readonly batchValues = Buffer.alloc(BATCH * EVENT_LAYOUT.size);
  private readonly inBatch = Buffer.alloc(8);
  private readonly outBatch = Buffer.alloc(8);
  private batchSupported = true;
  /**
   * Bursts opened as of the last look, whether the last sweep left some open, whether bursts
   * opened since the last sweep, and when the last look and sweep were (performance.now()).
   */
  private lastOpened = -1n;
  private pending = false;
  private owed = false;
  private lastLook = 0;
  private lastSweep = 0;

  constructor(lib: Libbpf, data: SweepData, ncpus: number) {
    this.lib = lib;
    this.data = data;
    this.ncpus = ncpus;
    forEachMapEntry(data.sweptFd, 4, 8, (key, value) =>
      this.delivered.set(key.readUInt32LE(0), timeWords(value.readBigUInt64LE(0))),
    );
    this.counterBuf = Buffer.alloc(ncpus * COUNTERS_LAYOUT.size);
  }

  /** True for a burst the kernel emitted that a sweep had posted already (forgotten then: it ends there). */
  isDuplicate(burst: BurstIdentity): boolean {
    const swept = this.delivered.get(burst.pid);
    if (swept === undefined || !burst.openedAt(swept.high, swept.low)) return false;
    this.delivered.delete(burst.pid);
    return true;
  }

  /** Tells the kernel a burst was delivered: it will not emit it when its thread starts the next. */
  markInKernel(pid: number, ktimeNs: bigint): void {
    this.sweptKey.writeUInt32LE(pid);
    this.sweptValue.writeBigUInt64LE(ktimeNs);
    this.lib.bpf_map_update_elem(this.data.sweptFd, this.sweptKey, this.sweptValue, 0);
  }

  /**
   * Looks once per interval; sweeps when bursts opened since the last sweep or some stayed
   * open. Reading the table costs a walk of all its buckets, and while bursts keep opening the
   * kernel emits each thread's burst at its next one: then a sweep finds only the newest few.
   * So while they keep opening it sweeps once per burst lifetime (burstMaxNs), which bounds how
   * long a thread gone quiet meanwhile waits, and at the first look that finds none opened.
   */
  tick(batch: RingBatch): void {
    const nowMs = performance.now();
    if (nowMs - this.lastLook < this.data.sweepIntervalMs) return;
    this.lastLook = nowMs;
    const opened = this.burstsOpened();
    const opening = opened !== this.lastOpened;
    this.lastOpened = opened;
    if (opening) this.owed = true;
    if (!this.owed && !this.pending) return;
    if (opening && nowMs - this.lastSweep < Number(this.data.burstMaxNs) / 1e6) return;
    this.owed = false;
    this.lastSweep = nowMs;
    this.pending = this.sweep(batch);
  }

  private burstsOpened(): bigint {
    const { lib, counterBuf } = this;
    if ((lib.bpf_map_lookup_elem(this.data.countersFd, this.zeroKey, counterBuf) as number) < 0) return -1n;
    let total = 0n;
    for (let cpu = 0; cpu < this.ncpus; cpu++) {
      total += counterBuf.readBigUInt64LE(cpu * COUNTERS_LAYOUT.size + COUNTERS_LAYOUT.bursts);
    }
    return total;
  }

  /** Posts bursts idle for 2× the gap (margin for a check in flight); true if some remain open. */
  private sweep(batch: RingBatch): boolean {
    const { burstGapNs, burstMaxNs, maxBatch } = this.data;
    const now = process.hrtime.bigint(); // CLOCK_MONOTONIC, like bpf_ktime_get_ns; read before the map
    let pending = false;
    this.readBursts((record) => {
      const burst = decodeBurstTimes(record);
      if (this.delivered.get(burst.pid)?.ns === burst.ktimeNs) return;
      const idle = now > burst.lastNs && now - burst.lastNs >= 2n * burstGapNs;
      const old = now > burst.ktimeNs && now - burst.ktimeNs >= burstMaxNs + burstGapNs;
      if ((idle || old) && batch.count >= maxBatch)
        pending = true; // the next sweep posts it
      else if (idle || old) {
        // Swept here: never posted twice; the kernel learns it when the batch is acknowledged.
        this.delivered.set(burst.pid, timeWords(burst.ktimeNs));
        batch.addMark(burst.pid, burst.ktimeNs);
        batch.append(record, 0, record.byteLength, burst.ktimeNs < this.data.adoptedBeforeNs);
        batch.swept++;
      } else {
        pending = true;
      }
    });
    // Bounded memory: forget the oldest marks (their kernel copies are long consumed).
    while (this.delivered.size > MAX_MARKS) {
      const oldest = this.delivered.keys().next().value;
      if (oldest === undefined) break;
      this.delivered.delete(oldest);
    }
    return pending;
  }

  /** Every pending burst: batched reads (one syscall per 1,024 entries, kernel ≥ 5.6). */
  private readBursts(visit: (record: Buffer) => void): void {
    const { lib, batchKeys, batchValues, inBatch, outBatch } = this;
    const { burstsFd } = this.data;
    if (this.batchSupported) {
      let first = true;
      for (;;) {
        const count = [BATCH];
        const rc = lib.bpf_map_lookup_batch(
          burstsFd,
          first ? null : inBatch,
          outBatch,
          batchKeys,
          batchValues,
          count,
          null,
        ) as number;
        if (rc < 0 && rc !== -2 /* ENOENT: end of map */) {
          if (first && (rc === -22 || rc === -95 || rc === -524)) {
            this.batchSupported = false; // older kernel: fall back to key-by-key
            break;
          }
          throw new Error(`bpf_map_lookup_batch on hive_bursts failed: ${rc}`);
        }
        const n = count[0] ?? 0;
        for (let i = 0; i < n; i++) {
          visit(batchValues.subarray(i * EVENT_LAYOUT.size, (i + 1) * EVENT_LAYOUT.size));
        }
        if (rc === -2) return;
        outBatch.copy(inBatch);
        first = false;
      }
    }
    forEachMapEntry(burstsFd, 4, EVENT_LAYOUT.size, (_key, value) => visit(value));
  }
}

/** A first-check time, and its high and low 32 bits. */
interface TimeWords {
  ns: bigint;
  high: number;
  low: number;
}

function timeWords(ns: bigint): TimeWords {
  return { ns, high: Number(ns >> 32n), low: Number(ns & 0xffffffffn) };
}
