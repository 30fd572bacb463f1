/**
 * The ring drain: reads the mapped ring (ring-reader.ts) on the main thread without ever
 * blocking it, and hands the raw records over in batches (ring-batch.ts; decoded by layout.ts).
 * Its waits let the event loop turn: poll(2) on the ring runs on libuv's thread pool, and the
 * other sleeps are Atomics.waitAsync on the shared words (ring-words.ts). It also ends idle
 * bursts (burst-sweep.ts): bursts idle for longer than the gap are read from hive_bursts and
 * handed over here, and marked in the pinned hive_swept map so that neither the kernel nor a
 * later agent delivers them again. Stopped through the `stop` word.
 *
 * Nothing is consumed before the consumer has it: a batch's ring space is released, and its
 * swept bursts marked, only when the consumer acknowledges the batch (ACK words, written after
 * the batch's alerts reached the spool). An agent killed in between leaves them to the next
 * one: delivered at least once, never lost.
 */
import { setImmediate as nextTurn } from "node:timers/promises";
import { BurstSweeper } from "./burst-sweep.ts";
import { BurstIdentity } from "./event-record.ts";
import { libbpf } from "./libbpf-ffi.ts";
import { RingBatch } from "./ring-batch.ts";
import { RingReader } from "./ring-reader.ts";
import { ACK, CONTROL, READING, sleepOn } from "./ring-words.ts";

const { stop: STOP, reading: READING_WORD, ringUsed: RING_USED, unread: UNREAD } = CONTROL;

export interface RingDrainData {
  eventsFd: number;
  burstsFd: number;
  /** hive_swept: bursts already delivered by a sweep (thread id → first-check time), pinned. */
  sweptFd: number;
  countersFd: number;
  burstGapNs: bigint;
  burstMaxNs: bigint;
  sweepIntervalMs: number;
  /**
   * Records per batch, at most: what the consumer learns of its alerts' room (the ring gate)
   * between two batches, so a pause comes at most one batch late.
   */
  maxBatch: number;
  /**
   * After a batch that was not full, how long the drain waits before reading again, so that
   * the records that follow gather into one batch: one handover per batch instead of per event.
   * The first record after a quiet spell is handed over at once.
   */
  coalesceMs: number;
  /** How long a stopping drain waits for the consumer to acknowledge its last batch. */
  finalAckTimeoutMs: number;
  /**
   * When this agent read the kernel's counters at load (CLOCK_MONOTONIC ns): bursts opened
   * before it are an earlier agent's backlog, counted apart (`backlog`) so that flush() is not
   * misled by them.
   */
  adoptedBeforeNs: bigint;
}

/** A batch handed to the consumer. */
export interface DrainedBatch {
  /** `count` raw struct hive_event records and where each starts (event-record.ts packedBatch). */
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

/** The consumer's side, each called on the drain's turn. */
export interface DrainSink {
  /** The ring is mapped: the drain reads from the next turn on. */
  ready(): void;
  /** A batch to hand to the listeners (synchronously: its handling is part of the drain's turn). */
  batch(batch: DrainedBatch): void;
  /** Stopping: the last batch is handed over; the drain waits for its acknowledgement (or ACK.final). */
  drained(): void;
}

/** The words the drain shares with its consumer (ring-words.ts); `acks` is this drain's own. */
export interface DrainWords {
  control: Int32Array;
  acks: BigInt64Array;
}

/** How long the drain sleeps between looks at the ring while read records await acknowledgement. */
const HELD_WAIT_MS = 10;

/** The drain's state: the shared words, the ring, the batch being filled and the burst sweeper. */
interface Drain {
  data: RingDrainData;
  control: Int32Array;
  acks: BigInt64Array;
  reader: RingReader;
  batch: RingBatch;
  sweeper: BurstSweeper;
  /** Per record read from the ring: created once, the decode loop's only callback. */
  onRecord: (bytes: Buffer, offset: number, length: number, at: number) => void;
}

/**
 * Drains the ring until the `stop` word is set, then hands over what is left. `fault`, asked at
 * each turn, fails the drain when true (tests: the consumer replaces a failed drain).
 */
export async function runDrain(
  data: RingDrainData,
  words: DrainWords,
  sink: DrainSink,
  fault: () => boolean = () => false,
): Promise<void> {
  const drain = openDrain(data, words, sink);
  try {
    sink.ready();
    // Listeners, holds and the gate set in the same turn as the start apply to the first batch.
    await nextTurn();
    while (Atomics.load(drain.control, STOP) === 0) {
      if (fault()) throw new Error("ring drain failure injected");
      await pollOnce(drain);
    }
    await shutdown(drain, sink);
  } finally {
    drain.reader.close();
  }
}

/** Maps the ring where an earlier drain of this process left off, and loads the sweep marks. */
function openDrain(data: RingDrainData, { control, acks }: DrainWords, sink: DrainSink): Drain {
  const lib = libbpf();
  const ncpus = lib.libbpf_num_possible_cpus() as number;
  const reader = new RingReader(data.eventsFd);
  // Records an earlier drain of this process handed over and the consumer handled.
  reader.skipTo(BigInt.asUintN(64, Atomics.load(acks, ACK.pos)));
  const batch = new RingBatch(reader.position, (b) => sink.batch(b));
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

/** One turn of the loop: acknowledgements in, then read (unless gated), sweep, and hand over. */
async function pollOnce(drain: Drain): Promise<void> {
  const { data, reader } = drain;
  if (await acksThenGate(drain)) return;
  if (consume(drain, data.maxBatch) === 0) {
    // With read records unreleased (acknowledgements held or not in yet) poll(2) would return
    // at once, every time: sleep on the acknowledgement word instead, and look again soon.
    if (reader.hasUnreleased())
      await sleepOn(drain.acks, ACK.seq, Atomics.load(drain.acks, ACK.seq), HELD_WAIT_MS);
    else await reader.readable(data.sweepIntervalMs);
    if (Atomics.load(drain.control, STOP) !== 0) return; // stopping: shutdown() reads what is left
    if (await acksThenGate(drain)) return; // the gate may have closed while it slept
    consume(drain, data.maxBatch);
  }
  drain.sweeper.tick(drain.batch);
  const handed = drain.batch.count;
  drain.batch.flush(reader);
  // After the handover: the consumer sees nothing unread only once what was read is handled.
  Atomics.store(drain.control, UNREAD, reader.unreadBytes());
  if (handed > 0 && handed < data.maxBatch && data.coalesceMs > 0)
    await sleepOn(drain.control, STOP, 0, data.coalesceMs); // returns at once once stopping
  // A full batch: more is waiting. The event loop turns before the next read, so that the
  // acknowledgement (which gives the ring back), the spool's writes and the rest of the agent
  // (leases, /healthz) run between batches; awaiting only promises would starve them all.
  else if (handed > 0) await nextTurn();
}

/** Acknowledgements in and the ring's use told; then true, after a wait, while the gate pauses reading. */
async function acksThenGate(drain: Drain): Promise<boolean> {
  applyAcks(drain);
  Atomics.store(drain.control, RING_USED, drain.reader.usedBytes());
  return waitWhileGated(drain);
}

/** Reads up to `limit` records from the ring into the batch; returns how many. */
function consume(drain: Drain, limit?: number): number {
  drain.batch.readFrom(drain.reader.position);
  return drain.reader.consume(drain.onRecord, limit);
}

/**
 * Releases the ring space the consumer has acknowledged, and marks in the kernel the swept
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

/**
 * Waits a while, and returns true, when the consumer says not to read now: the alerts of what
 * was read can be neither written nor delivered. Nothing more is read (the ring keeps it, the
 * kernel counts what it cannot take); sweeping would hand over more too.
 */
async function waitWhileGated(drain: Drain): Promise<boolean> {
  const { control, data } = drain;
  if (Atomics.load(control, READING_WORD) !== READING.paused) return false;
  await sleepOn(control, READING_WORD, READING.paused, data.sweepIntervalMs);
  return true;
}

/**
 * Drains what is left before stopping, and releases it once the consumer has it (unless
 * alerts cannot be made durable now: then it stays in the ring for the next agent).
 */
async function shutdown(drain: Drain, sink: DrainSink): Promise<void> {
  const { control, acks, reader, batch, data } = drain;
  if (Atomics.load(control, READING_WORD) === READING.free) consume(drain);
  batch.flush(reader);
  sink.drained();
  const deadline = performance.now() + data.finalAckTimeoutMs;
  while (
    applyAcks(drain) < batch.seq &&
    Atomics.load(acks, ACK.final) === 0n &&
    performance.now() < deadline
  ) {
    await sleepOn(acks, ACK.seq, Atomics.load(acks, ACK.seq), 50);
  }
}
