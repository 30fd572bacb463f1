/**
 * Worker thread that drains the ring buffer so Node's event loop never blocks: it reads
 * the mapped ring (ring-reader.ts), waits in poll(2) with a short timeout, and posts the raw
 * records in batches (ring-batch.ts; decoded by layout.ts on the main thread). It also ends
 * idle bursts (burst-sweep.ts): bursts idle for longer than the gap are read from hive_bursts
 * and posted here, and marked in the pinned hive_swept map so that neither the kernel nor a
 * later agent delivers them again. Stopped through a shared flag.
 *
 * Nothing is consumed before the main thread has it: a batch's ring space is released, and
 * its swept bursts marked, only when the main thread acknowledges the batch (ACK words,
 * written after the batch's alerts reached the spool). An agent killed in between leaves
 * them to the next one: delivered at least once, never lost.
 */
import { parentPort, workerData } from "node:worker_threads";
import { BurstSweeper } from "./burst-sweep.ts";
import { BurstIdentity } from "./event-record.ts";
import { libbpf } from "./libbpf-ffi.ts";
import { RingBatch } from "./ring-batch.ts";
import { ACK, CONTROL, READING } from "./ring-consumer.ts";
import { RingReader } from "./ring-reader.ts";

const {
  stop: STOP,
  inFlight: IN_FLIGHT,
  reading: READING_WORD,
  ringUsed: RING_USED,
  unread: UNREAD,
} = CONTROL;

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
  /**
   * After posting a batch that was not full, how long the worker waits before reading again,
   * so that the records that follow gather into one batch: one wakeup of each thread per batch
   * instead of per event. The first record after a quiet spell is posted at once.
   */
  coalesceMs: number;
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
  /**
   * `records`: `count` raw struct hive_event records and where each starts (as event-record.ts
   * packedBatch reads them), transferred, not cloned.
   */
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

/** The worker's state: the shared words, the ring, the batch being filled and the burst sweeper. */
interface Drain {
  data: RingWorkerData;
  control: Int32Array;
  acks: BigInt64Array;
  reader: RingReader;
  batch: RingBatch;
  sweeper: BurstSweeper;
  /** Per record read from the ring: created once, the decode loop's only callback. */
  onRecord: (bytes: Buffer, offset: number, length: number, at: number) => void;
}

function run(
  data: RingWorkerData,
  post: (message: RingWorkerMessage, transfer?: ArrayBuffer[]) => void,
): void {
  const drain = openDrain(data, post);
  post({ type: "ready" });
  try {
    while (Atomics.load(drain.control, STOP) === 0) pollOnce(drain);
    shutdown(drain, post);
  } finally {
    drain.reader.close();
  }
}

/** Maps the ring where an earlier worker of this process left off, and loads the sweep marks. */
function openDrain(
  data: RingWorkerData,
  post: (message: RingWorkerMessage, transfer?: ArrayBuffer[]) => void,
): Drain {
  const lib = libbpf();
  const control = new Int32Array(data.control);
  const ncpus = lib.libbpf_num_possible_cpus() as number;
  const acks = new BigInt64Array(data.acks);
  const reader = new RingReader(data.eventsFd);
  // Records an earlier worker of this process posted and the main thread handled.
  reader.skipTo(BigInt.asUintN(64, Atomics.load(acks, ACK.pos)));
  const batch = new RingBatch(reader.position, control, post);
  const sweeper = new BurstSweeper(lib, data, ncpus);
  const burst = new BurstIdentity(data.adoptedBeforeNs);
  const onRecord = (bytes: Buffer, offset: number, length: number, at: number) => {
    burst.read(bytes, offset);
    if (sweeper.isDuplicate(burst)) {
      batch.duplicates++;
      return;
    }
    batch.noteRead(at, length, burst.openedBeforeAdoption());
  };
  return { data, control, acks, reader, batch, sweeper, onRecord };
}

/** One turn of the loop: acknowledgements in, then read (unless gated), sweep, and post. */
function pollOnce(drain: Drain): void {
  const { data, reader } = drain;
  applyAcks(drain);
  Atomics.store(drain.control, RING_USED, reader.usedBytes());
  if (waitWhileGated(drain)) return;
  if (consume(drain, data.maxBatch) === 0) {
    // With read records unreleased (acknowledgements held or not in yet) poll(2) would return
    // at once, every time: sleep on the acknowledgement word instead, and look again soon.
    if (reader.hasUnreleased())
      Atomics.wait(drain.acks, ACK.seq, Atomics.load(drain.acks, ACK.seq), HELD_WAIT_MS);
    else reader.wait(data.sweepIntervalMs);
    consume(drain, data.maxBatch);
  }
  drain.sweeper.tick(drain.batch);
  const posted = drain.batch.count;
  drain.batch.flush(reader);
  // After the post: the main thread sees nothing unread only once what was read is in flight.
  Atomics.store(drain.control, UNREAD, reader.unreadBytes());
  if (posted > 0 && posted < data.maxBatch && data.coalesceMs > 0)
    Atomics.wait(drain.control, STOP, 0, data.coalesceMs); // returns at once once stopping
}

/** Reads up to `limit` records from the ring into the batch; returns how many. */
function consume(drain: Drain, limit?: number): number {
  drain.batch.readFrom(drain.reader.position);
  return drain.reader.consume(drain.onRecord, limit);
}

/**
 * Releases the ring space the main thread has acknowledged, and marks in the kernel the swept
 * bursts of acknowledged batches. Returns the last acknowledged batch.
 */
function applyAcks(drain: Drain): number {
  const { acks, batch, sweeper } = drain;
  const acked = Number(Atomics.load(acks, ACK.seq));
  drain.reader.release(BigInt.asUintN(64, Atomics.load(acks, ACK.pos)));
  for (let marks = batch.takeAckedMarks(acked); marks; marks = batch.takeAckedMarks(acked)) {
    for (const [pid, ktimeNs] of marks) sweeper.markInKernel(pid, ktimeNs);
  }
  return acked;
}

/** Waits a while, and returns true, when the main thread says not to read now. */
function waitWhileGated(drain: Drain): boolean {
  const { control, data } = drain;
  const reading = Atomics.load(control, READING_WORD);
  if (reading === READING.paused) {
    // The alerts of what was read cannot be written or delivered: read nothing more (the
    // ring keeps it, the kernel counts what it cannot take); sweeping would post more too.
    Atomics.wait(control, READING_WORD, READING.paused, data.sweepIntervalMs);
    return true;
  }
  const inFlight = Atomics.load(control, IN_FLIGHT);
  if (inFlight >= data.maxInFlight || (reading === READING.oneBatch && inFlight > 0)) {
    // Backpressure: the main thread is behind. Events wait in the ring buffer (or are
    // counted lost by the kernel when it fills); memory here stays bounded.
    Atomics.wait(control, IN_FLIGHT, inFlight, data.sweepIntervalMs);
    return true;
  }
  return false;
}

/**
 * Drains what is left before stopping, and releases it once the main thread has it (unless
 * alerts cannot be made durable now: then it stays in the ring for the next agent).
 */
function shutdown(drain: Drain, post: (message: RingWorkerMessage) => void): void {
  const { control, acks, reader, batch, data } = drain;
  if (Atomics.load(control, READING_WORD) === READING.free) consume(drain);
  batch.flush(reader);
  post({ type: "drained", seq: batch.seq });
  const deadline = performance.now() + data.finalAckTimeoutMs;
  while (
    applyAcks(drain) < batch.seq &&
    Atomics.load(acks, ACK.final) === 0n &&
    performance.now() < deadline
  ) {
    Atomics.wait(acks, ACK.seq, Atomics.load(acks, ACK.seq), 50);
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
