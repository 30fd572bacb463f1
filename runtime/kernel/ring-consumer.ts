/**
 * The main thread's side of the ring worker (ring-worker.ts): starts it, decodes the batches
 * it posts and hands each event to the listeners, bounds what may wait between the two
 * threads, and restarts a worker that died, reporting not-ready until the new one runs.
 *
 * The bound is backpressure, not a drop: past `maxInFlight` posted-but-unhandled events the
 * worker stops reading the ring buffer, which then fills and makes the kernel count what it
 * cannot reserve as lost (hive_kernel_events_lost_total). Memory stays bounded and every
 * loss is counted where it happens.
 *
 * Consumption is acknowledged: after the listeners took a batch (its alerts are appended to
 * the spool, which writes them at the end of the same event-loop turn), the acknowledgement
 * is written at the end of that turn, and only then does the worker give the batch's ring
 * space back to the kernel and mark its swept bursts. `holdAcks()` defers it further (the
 * loader holds events until its first sync). A process killed before that leaves the
 * events to the next agent. After a worker crash the new worker starts where the handled
 * batches end; batches handled after that may be delivered twice, never lost.
 */
import { Worker } from "node:worker_threads";
import type { Logger } from "../log.ts";
import type { KernelEvent, RingGate } from "./contract.ts";
import { eventAt } from "./event-decode.ts";
import { packedBatch, type RecordBatch } from "./event-record.ts";
import type { RingWorkerData, RingWorkerMessage } from "./ring-worker.ts";

/**
 * Control words shared with the worker (Int32Array over a SharedArrayBuffer). `unread`: bytes
 * of the ring the worker has not read yet as of its last look, -1 before its first.
 */
export const CONTROL = { stop: 0, inFlight: 1, reading: 2, ringUsed: 3, unread: 4, words: 5 } as const;
/**
 * The `reading` word: free; paused (alerts can wait no more: read nothing); one batch at a time
 * (the spool's disk refuses writes: a pause then comes at most one batch late).
 */
export const READING = { free: 0, paused: 1, oneBatch: 2 } as const;
/**
 * Acknowledgement words (BigInt64Array over a SharedArrayBuffer, one per worker): the ring
 * position and batch handled, and `final` = no more acknowledgements will come.
 */
export const ACK = { pos: 0, seq: 1, final: 2, words: 3 } as const;

/** How often a held or paused consumer looks at its gate again. */
const GATE_POLL_MS = 50;

export interface RingConsumerOptions {
  data: Omit<
    RingWorkerData,
    "control" | "maxInFlight" | "maxBatch" | "coalesceMs" | "acks" | "finalAckTimeoutMs"
  >;
  /** Events posted by the worker and not yet handed to the listeners, at most. Default 16,384. */
  maxInFlight?: number;
  /** Events per batch the worker posts, at most. Default 256. */
  maxBatch?: number;
  /** RingWorkerData.coalesceMs. Default 5 ms. */
  coalesceMs?: number;
  /** Delay before a dead worker is replaced. Default 1 s. */
  restartDelayMs?: number;
  /**
   * Each event, read in place from its batch: the batch's record at `at` is its raw record. An
   * event kept beyond the call is kept as `retainedEvent(event)`, which holds its own bytes; the
   * flood summaries keep the newest batches themselves, bounded (flood-summaries.ts keep).
   */
  onEvent: (event: KernelEvent, batch: RecordBatch, at: number) => void;
  /** Durability of what the listeners made of the events (RingGate); without it, handled = released. */
  gate?: RingGate | undefined;
  logger?: Logger | undefined;
}

export class RingConsumer {
  /** Events handed to the listeners (kernel-emitted + swept, duplicates dropped). */
  delivered = 0n;
  /** Of `delivered`, bursts an earlier agent opened (RingWorkerData.adoptedBeforeNs). */
  backlog = 0n;
  /** The most events that waited between the threads at once. */
  inFlightPeak = 0;
  /** Workers that died and were replaced. */
  restarts = 0;
  private readonly control = new SharedArrayBuffer(4 * CONTROL.words);
  private readonly words = new Int32Array(this.control);
  private readonly options: RingConsumerOptions;
  private worker: Worker | null = null;
  private stopping = false;
  /** Why the consumer is not running, while it is not. */
  private down: string | undefined;
  private ready: Promise<void> = Promise.resolve();
  /** The newest batch handled and not yet acknowledged (of the worker owning `acks`). */
  private unacked: { acks: BigInt64Array; seq: number; ringPos: bigint } | undefined;
  /** The ring position after the last batch acknowledged, whichever worker read it. */
  private ackedPos = 0n;
  private ackScheduled = false;
  private holds = 0;
  private gateTimer: NodeJS.Timeout | undefined;
  private heldByGate = false;
  /** The stopping worker's acknowledgement words, once it drained. */
  private finalAcks: BigInt64Array | undefined;

  constructor(options: RingConsumerOptions) {
    this.options = options;
    this.start();
  }

  /** Resolves once a worker reads the ring buffer (events before that wait in it). */
  whenReady(): Promise<void> {
    return this.ready;
  }

  /** Not ok while no worker reads the ring buffer (between a crash and the restart), or the gate holds it. */
  health(): { ok: boolean; message?: string } {
    if (this.down !== undefined) return { ok: false, message: this.down };
    const gated = this.gated();
    return gated === undefined ? { ok: true } : { ok: false, message: gated };
  }

  private start(): void {
    const acks = new BigInt64Array(new SharedArrayBuffer(8 * ACK.words));
    acks[ACK.pos] = BigInt.asIntN(64, this.ackedPos);
    const data: RingWorkerData = {
      ...this.options.data,
      control: this.control,
      maxInFlight: this.options.maxInFlight ?? 16_384,
      maxBatch: this.options.maxBatch ?? 256,
      coalesceMs: this.options.coalesceMs ?? 5,
      acks: acks.buffer as SharedArrayBuffer,
      finalAckTimeoutMs: 10_000,
    };
    Atomics.store(this.words, CONTROL.inFlight, 0); // what a dead worker had posted is handled or gone
    Atomics.store(this.words, CONTROL.unread, -1); // unknown until the new worker has looked
    // Compiled packages ship ring-worker.js beside this file; sources run as .ts.
    const extension = import.meta.url.slice(import.meta.url.lastIndexOf("."));
    const worker = new Worker(new URL(`./ring-worker${extension}`, import.meta.url), { workerData: data });
    this.worker = worker;
    this.ready = new Promise<void>((resolve) => {
      worker.on("message", (message: RingWorkerMessage) => message.type === "ready" && resolve());
      worker.on("exit", () => resolve());
    });
    worker.on("message", (message: RingWorkerMessage) => {
      if (message.type === "ready") this.down = undefined;
      else if (message.type === "events") {
        this.backlog += BigInt(message.backlog);
        this.handle(message.records, message.count);
        this.unacked = { acks, seq: message.seq, ringPos: message.ringPos };
        this.scheduleAck();
      } else if (message.type === "drained") {
        this.finalAcks = acks;
        if (this.holds > 0 || this.heldByGate) this.leaveToNextAgent();
      } else if (message.type === "error")
        this.options.logger?.error("ring buffer consumer failed", { error: message.message });
    });
    worker.on("error", (error) =>
      this.options.logger?.error("ring buffer worker crashed", { error: String(error) }),
    );
    worker.on("exit", (code) => {
      if (this.stopping || this.worker !== worker) return;
      this.down = `the ring buffer consumer stopped (exit ${code}); restarting it`;
      this.restarts++;
      this.options.logger?.error("ring buffer worker died; restarting it", { exitCode: code });
      // Events wait in the ring buffer meanwhile (and are counted lost if it fills).
      setTimeout(() => {
        if (!this.stopping) this.start();
      }, this.options.restartDelayMs ?? 1000);
    });
  }

  private handle(records: ArrayBuffer, count: number): void {
    this.inFlightPeak = Math.max(this.inFlightPeak, Atomics.load(this.words, CONTROL.inFlight));
    this.delivered += BigInt(count); // once per batch: a bigint add allocates
    try {
      // One view of the batch; each event is read in place from it (no copy per event).
      const batch = packedBatch(records, count);
      const { offsets } = batch;
      const onEvent = this.options.onEvent;
      for (let i = 0; i < count; i++) {
        const at = offsets[i] as number;
        onEvent(eventAt(batch, at), batch, at);
      }
    } finally {
      Atomics.sub(this.words, CONTROL.inFlight, count);
      Atomics.notify(this.words, CONTROL.inFlight);
    }
    this.applyGate();
  }

  /** Sets how the worker may read from what the gate says now. */
  private applyGate(): void {
    const gate = this.options.gate;
    const want = !gate
      ? READING.free
      : gate.full()
        ? READING.paused
        : gate.degraded()
          ? READING.oneBatch
          : READING.free;
    const was = Atomics.load(this.words, CONTROL.reading);
    if (want !== was) {
      Atomics.store(this.words, CONTROL.reading, want);
      Atomics.notify(this.words, CONTROL.reading);
      Atomics.notify(this.words, CONTROL.inFlight);
      if (want === READING.paused) {
        // Events stay in the ring (the kernel counts what it cannot take) until alerts fit again.
        this.options.logger?.warn(
          "alerts can be neither written nor delivered; ring buffer reading paused",
          {},
        );
      } else if (was === READING.paused) this.options.logger?.info("ring buffer reading resumed", {});
    }
    if (want !== READING.free || this.heldByGate) this.watchGate();
  }

  /** While the gate holds or slows the ring: looks again every GATE_POLL_MS until it lets go. */
  private watchGate(): void {
    if (this.gateTimer || this.stopping) return;
    this.gateTimer = setInterval(() => {
      if (this.heldByGate) this.acknowledge();
      this.applyGate();
      if (!this.heldByGate && Atomics.load(this.words, CONTROL.reading) === READING.free) {
        clearInterval(this.gateTimer);
        this.gateTimer = undefined;
      }
    }, GATE_POLL_MS);
    this.gateTimer.unref();
  }

  /** Bytes of the ring not released to the kernel, as the worker last saw them. */
  ringUsedBytes(): number {
    return Atomics.load(this.words, CONTROL.ringUsed);
  }

  /**
   * True when every record in the ring as of the worker's last look was read and handed to
   * the listeners (an earlier agent's backlog included); false while that is not known.
   */
  drained(): boolean {
    return Atomics.load(this.words, CONTROL.unread) === 0 && Atomics.load(this.words, CONTROL.inFlight) === 0;
  }

  /** What the listeners' alerts need from the ring from now on (RingGate). */
  setGate(gate: RingGate | undefined): void {
    this.options.gate = gate;
    this.applyGate();
    if (!gate) this.acknowledge();
  }

  /** Whether reading is paused because alerts cannot wait any more. */
  get paused(): boolean {
    return Atomics.load(this.words, CONTROL.reading) === READING.paused;
  }

  /** Whether the release of handled events is held because their alerts are not durable yet. */
  get held(): boolean {
    return this.heldByGate;
  }

  /** Held events are not consumed: the stopping worker leaves them in the ring for the next agent. */
  private leaveToNextAgent(): void {
    const acks = this.finalAcks;
    if (!acks) return;
    Atomics.store(acks, ACK.final, 1n);
    Atomics.notify(acks, ACK.seq);
  }

  /** Why events wait in the ring for the alerts' sake, while they do. */
  gated(): string | undefined {
    if (this.paused)
      return "ring buffer reading paused: alerts can neither be written to the spool nor delivered";
    if (this.heldByGate)
      return "ring buffer space held: handled events' alerts are not on disk or delivered yet";
    return undefined;
  }

  /**
   * Acknowledges at the end of this turn: after the spool wrote what the listeners appended
   * (runtime/alerts/spool/spool-writer.ts writes with setImmediate, scheduled before this one).
   */
  private scheduleAck(): void {
    if (this.ackScheduled) return;
    this.ackScheduled = true;
    setImmediate(() => {
      this.ackScheduled = false;
      this.acknowledge();
    });
  }

  private acknowledge(): void {
    const done = this.unacked;
    if (!done || this.holds > 0) return;
    if (this.options.gate?.holding()) {
      // Released only once durable or decided: a process killed meanwhile leaves the events to the next agent.
      this.heldByGate = true;
      if (this.finalAcks) this.leaveToNextAgent();
      else this.watchGate();
      return;
    }
    this.heldByGate = false;
    this.unacked = undefined;
    if (done.ringPos > this.ackedPos) this.ackedPos = done.ringPos;
    Atomics.store(done.acks, ACK.pos, BigInt.asIntN(64, done.ringPos));
    Atomics.store(done.acks, ACK.seq, BigInt(done.seq));
    Atomics.notify(done.acks, ACK.seq);
  }

  /**
   * Defers acknowledging until the returned release is called: events handled meanwhile stay
   * in the kernel's ring buffer and burst table (bounded there; the kernel counts what does
   * not fit), so that a process killed before the release loses none of them.
   */
  holdAcks(): () => void {
    this.holds++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.holds--;
      if (this.holds === 0) this.scheduleAck();
    };
  }

  /** Stops the worker after its last drain; every batch it posted is handled before this resolves. */
  async stop(): Promise<void> {
    this.stopping = true;
    clearInterval(this.gateTimer);
    this.gateTimer = undefined;
    const worker = this.worker;
    if (!worker || this.down !== undefined) return; // a dead worker has nothing left to post
    const done = new Promise<void>((resolve) => {
      worker.on("message", (m: RingWorkerMessage) => m.type === "stopped" && resolve());
      worker.on("exit", () => resolve());
    });
    worker.ref(); // keep the process alive until the consumer has stopped
    Atomics.store(this.words, CONTROL.stop, 1);
    Atomics.notify(this.words, CONTROL.inFlight);
    await done;
    await worker.terminate();
  }

  /** The running worker, for fault injection in tests (terminate it to see a restart). */
  get thread(): Worker | null {
    return this.worker;
  }
}
