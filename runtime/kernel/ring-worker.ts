/**
 * Worker thread that drains the ring buffer so Node's event loop never blocks: it reads
 * the mapped ring (ring-reader.ts), waits in poll(2) with a short timeout, decodes events
 * (layout.ts) and posts them in batches. It also ends idle bursts: a burst stays pending in hive_bursts until its thread
 * next hits a watched file, so bursts idle for longer than the gap are read from the map
 * and posted here, and marked in the pinned hive_swept map so that neither the kernel nor a
 * later agent delivers them again (a burst the kernel emitted while the mark was being
 * written is dropped here as a duplicate). Stopped through a shared flag.
 *
 * Nothing is consumed before the main thread has it: a batch's ring space is released, and
 * its swept bursts marked, only when the main thread acknowledges the batch (ACK words,
 * written after the batch's alerts reached the spool). An agent killed in between leaves
 * them to the next one: delivered at least once, never lost.
 */
import { parentPort, workerData } from "node:worker_threads";
import { COUNTERS_LAYOUT, decodeBurstTimes, EVENT_LAYOUT } from "./layout.ts";
import { forEachMapEntry, libbpf } from "./libbpf-ffi.ts";
import { ACK, CONTROL, READING } from "./ring-consumer.ts";
import { RingReader } from "./ring-reader.ts";

const { stop: STOP, inFlight: IN_FLIGHT, reading: READING_WORD, ringUsed: RING_USED } = CONTROL;

export interface RingWorkerData {
  eventsFd: number;
  burstsFd: number;
  /** hive_swept: bursts already delivered by a sweep (thread id → first-check time), pinned. */
  sweptFd: number;
  countersFd: number;
  burstGapNs: bigint;
  burstMaxNs: bigint;
  sweepIntervalMs: number;
  /** Int32Array over a SharedArrayBuffer (ring-consumer.ts CONTROL): stop requested, events in flight, reading paused. */
  control: SharedArrayBuffer;
  /** Stop reading the ring while this many posted events wait for the main thread. */
  maxInFlight: number;
  /**
   * Records per posted batch, at most: what the main thread learns of its alerts' room (the
   * ring gate) between two batches, so a pause comes at most one batch late.
   */
  maxBatch: number;
  /** How long a stopping worker waits for the main thread to acknowledge its last batch. */
  finalAckTimeoutMs: number;
  /**
   * BigInt64Array over a SharedArrayBuffer (ring-consumer.ts ACK): the ring position and batch
   * the main thread has handled; the position starts where an earlier worker's acks ended.
   */
  acks: SharedArrayBuffer;
  /**
   * When this agent read the kernel's counters at load (CLOCK_MONOTONIC ns): bursts opened
   * before it are an earlier agent's backlog, counted apart (`backlog`) so that flush() is not
   * misled by them.
   */
  adoptedBeforeNs: bigint;
}

export type RingWorkerMessage =
  /** `records`: `count` raw struct hive_event records back to back (transferred, not cloned). */
  | {
      type: "events";
      records: ArrayBuffer;
      count: number;
      /** Acknowledged (ACK.seq) once handled; the ring position after the batch. */
      seq: number;
      ringPos: bigint;
      swept: number;
      duplicates: number;
      /** Of `count`, bursts opened before adoptedBeforeNs. */
      backlog: number;
    }
  | { type: "ready" }
  /** Stopping: the last batch was `seq`; the worker waits for its acknowledgement (or ACK.final). */
  | { type: "drained"; seq: number }
  | { type: "error"; message: string }
  | { type: "stopped" };

/** How long the worker sleeps between looks at the ring while read records await acknowledgement. */
const HELD_WAIT_MS = 10;

function run(
  data: RingWorkerData,
  post: (message: RingWorkerMessage, transfer?: ArrayBuffer[]) => void,
): void {
  const lib = libbpf();
  const control = new Int32Array(data.control);
  const ncpus = lib.libbpf_num_possible_cpus() as number;
  const acks = new BigInt64Array(data.acks);
  const reader = new RingReader(data.eventsFd);
  // Records an earlier worker of this process posted and the main thread handled.
  reader.skipTo(BigInt.asUintN(64, Atomics.load(acks, ACK.pos)));
  // Raw records, copied out of the ring and posted as one transferred buffer: decoding
  // into objects here and cloning them across threads cost more than decoding there.
  const SIZE = EVENT_LAYOUT.size;
  let batch = new Uint8Array(SIZE * 1024);
  let batchCount = 0;
  const append = (record: Uint8Array, ktimeNs: bigint) => {
    if (ktimeNs < data.adoptedBeforeNs) backlog++;
    if ((batchCount + 1) * SIZE > batch.length) {
      const bigger = new Uint8Array(batch.length * 2);
      bigger.set(batch.subarray(0, batchCount * SIZE));
      batch = bigger;
    }
    batch.set(record.subarray(0, SIZE), batchCount * SIZE);
    batchCount++;
  };
  let seq = 0;
  let postedPos = reader.position;
  /** Swept bursts by batch, marked in the kernel once their batch is acknowledged. */
  const unmarked: { seq: number; marks: [pid: number, ktimeNs: bigint][] }[] = [];
  let batchMarks: [number, bigint][] = [];
  const flushBatch = () => {
    // Duplicates alone still move the ring position: posted (empty) so that it is released.
    if (batchCount === 0 && reader.position === postedPos) return;
    const records = batch.slice(0, batchCount * SIZE).buffer;
    Atomics.add(control, IN_FLIGHT, batchCount);
    seq++;
    postedPos = reader.position;
    if (batchMarks.length > 0) unmarked.push({ seq, marks: batchMarks });
    batchMarks = [];
    post(
      { type: "events", records, count: batchCount, seq, ringPos: postedPos, swept, duplicates, backlog },
      [records],
    );
    batchCount = 0;
    swept = 0;
    duplicates = 0;
    backlog = 0;
  };
  let swept = 0;
  let duplicates = 0;
  let backlog = 0;
  // Bursts posted by the sweep, by thread id → first-check time; from the kernel's record
  // first, so that a restarted agent does not deliver again what its predecessor swept.
  const delivered = new Map<number, bigint>();
  forEachMapEntry(data.sweptFd, 4, 8, (key, value) =>
    delivered.set(key.readUInt32LE(0), value.readBigUInt64LE(0)),
  );
  const sweptKey = Buffer.alloc(4);
  const sweptValue = Buffer.alloc(8);
  /** Tells the kernel a burst was delivered: it will not emit it when its thread starts the next. */
  const markInKernel = (pid: number, ktimeNs: bigint) => {
    sweptKey.writeUInt32LE(pid);
    sweptValue.writeBigUInt64LE(ktimeNs);
    lib.bpf_map_update_elem(data.sweptFd, sweptKey, sweptValue, 0);
  };
  /** Swept here: never posted twice; the kernel learns it when the batch is acknowledged. */
  const markSwept = (pid: number, ktimeNs: bigint) => {
    delivered.set(pid, ktimeNs);
    batchMarks.push([pid, ktimeNs]);
  };

  const applyAcks = (): number => {
    const acked = Number(Atomics.load(acks, ACK.seq));
    reader.release(BigInt.asUintN(64, Atomics.load(acks, ACK.pos)));
    while (unmarked.length > 0 && (unmarked[0]?.seq ?? Infinity) <= acked) {
      for (const [pid, ktimeNs] of unmarked.shift()?.marks ?? []) markInKernel(pid, ktimeNs);
    }
    return acked;
  };
  const onRecord = (record: Uint8Array) => {
    const burst = decodeBurstTimes(record);
    if (delivered.get(burst.pid) === burst.ktimeNs) {
      delivered.delete(burst.pid);
      duplicates++;
      return;
    }
    append(record, burst.ktimeNs);
  };
  post({ type: "ready" });
  const counterBuf = Buffer.alloc(ncpus * COUNTERS_LAYOUT.size);
  const zeroKey = Buffer.alloc(4);
  const burstsOpened = (): bigint => {
    if ((lib.bpf_map_lookup_elem(data.countersFd, zeroKey, counterBuf) as number) < 0) return -1n;
    let total = 0n;
    for (let cpu = 0; cpu < ncpus; cpu++) {
      total += counterBuf.readBigUInt64LE(cpu * COUNTERS_LAYOUT.size + COUNTERS_LAYOUT.bursts);
    }
    return total;
  };

  const BATCH = 1024;
  const batchKeys = Buffer.alloc(BATCH * 4);
  const batchValues = Buffer.alloc(BATCH * EVENT_LAYOUT.size);
  const inBatch = Buffer.alloc(8);
  const outBatch = Buffer.alloc(8);
  let batchSupported = true;

  /** Every pending burst: batched reads (one syscall per 1,024 entries, kernel ≥ 5.6). */
  const readBursts = (visit: (record: Uint8Array) => void): void => {
    if (batchSupported) {
      let first = true;
      for (;;) {
        const count = [BATCH];
        const rc = lib.bpf_map_lookup_batch(
          data.burstsFd,
          first ? null : inBatch,
          outBatch,
          batchKeys,
          batchValues,
          count,
          null,
        ) as number;
        if (rc < 0 && rc !== -2 /* ENOENT: end of map */) {
          if (first && (rc === -22 || rc === -95 || rc === -524)) {
            batchSupported = false; // older kernel: fall back to key-by-key
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
    forEachMapEntry(data.burstsFd, 4, EVENT_LAYOUT.size, (_key, value) => visit(value));
  };

  /** Posts bursts idle for 2× the gap (margin for a check in flight); true if some remain open. */
  const sweep = (): boolean => {
    const now = process.hrtime.bigint(); // CLOCK_MONOTONIC, like bpf_ktime_get_ns; read before the map
    let pending = false;
    readBursts((record) => {
      const burst = decodeBurstTimes(record);
      if (delivered.get(burst.pid) === burst.ktimeNs) return;
      const idle = now > burst.lastNs && now - burst.lastNs >= 2n * data.burstGapNs;
      const old = now > burst.ktimeNs && now - burst.ktimeNs >= data.burstMaxNs + data.burstGapNs;
      if ((idle || old) && batchCount >= data.maxBatch)
        pending = true; // the next sweep posts it
      else if (idle || old) {
        markSwept(burst.pid, burst.ktimeNs);
        append(record, burst.ktimeNs);
        swept++;
      } else {
        pending = true;
      }
    });
    // Bounded memory: forget the oldest marks (their kernel copies are long consumed).
    while (delivered.size > 4 * 8192) {
      const oldest = delivered.keys().next().value;
      if (oldest === undefined) break;
      delivered.delete(oldest);
    }
    return pending;
  };

  let lastOpened = -1n;
  let pending = false;
  let lastSweep = 0;
  try {
    while (Atomics.load(control, STOP) === 0) {
      applyAcks();
      Atomics.store(control, RING_USED, reader.usedBytes());
      const reading = Atomics.load(control, READING_WORD);
      if (reading === READING.paused) {
        // The alerts of what was read cannot be written or delivered: read nothing more (the
        // ring keeps it, the kernel counts what it cannot take); sweeping would post more too.
        Atomics.wait(control, READING_WORD, READING.paused, data.sweepIntervalMs);
        continue;
      }
      const inFlight = Atomics.load(control, IN_FLIGHT);
      if (inFlight >= data.maxInFlight || (reading === READING.oneBatch && inFlight > 0)) {
        // Backpressure: the main thread is behind. Events wait in the ring buffer (or are
        // counted lost by the kernel when it fills); memory here stays bounded.
        Atomics.wait(control, IN_FLIGHT, inFlight, data.sweepIntervalMs);
        continue;
      }
      if (reader.consume(onRecord, data.maxBatch) === 0) {
        // With read records unreleased (acknowledgements held or not in yet) poll(2) would return
        // at once, every time: sleep on the acknowledgement word instead, and look again soon.
        if (reader.hasUnreleased()) Atomics.wait(acks, ACK.seq, Atomics.load(acks, ACK.seq), HELD_WAIT_MS);
        else reader.wait(data.sweepIntervalMs);
        reader.consume(onRecord, data.maxBatch);
      }
      const nowMs = performance.now();
      if (nowMs - lastSweep >= data.sweepIntervalMs) {
        lastSweep = nowMs;
        const opened = burstsOpened();
        if (opened !== lastOpened || pending) {
          lastOpened = opened;
          pending = sweep();
        }
      }
      flushBatch();
    }
    // Drain what is left before stopping, and release it once the main thread has it (unless
    // alerts cannot be made durable now: then it stays in the ring for the next agent).
    if (Atomics.load(control, READING_WORD) === READING.free) reader.consume(onRecord);
    flushBatch();
    post({ type: "drained", seq });
    const deadline = performance.now() + data.finalAckTimeoutMs;
    while (applyAcks() < seq && Atomics.load(acks, ACK.final) === 0n && performance.now() < deadline) {
      Atomics.wait(acks, ACK.seq, Atomics.load(acks, ACK.seq), 50);
    }
  } finally {
    reader.close();
  }
}

if (parentPort) {
  const port = parentPort;
  try {
    run(workerData as RingWorkerData, (message, transfer) => port.postMessage(message, transfer ?? []));
  } catch (error) {
    port.postMessage({ type: "error", message: error instanceof Error ? error.message : String(error) });
  }
  port.postMessage({ type: "stopped" } satisfies RingWorkerMessage);
}
