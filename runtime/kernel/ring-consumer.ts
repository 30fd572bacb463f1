/**
 * The consumer of the ring drain (ring-drain.ts): starts it, decodes the batches it hands over
 * and gives each event to the listeners, and replaces a drain that failed, reporting not-ready
 * until the new one runs.
 *
 * Reading pauses rather than drops: while the gate says alerts can wait no more, the drain
 * reads nothing; the ring then fills and the kernel counts what it cannot reserve as lost
 * (hive_kernel_events_lost_total). Memory stays bounded and every loss is counted where it
 * happens.
 *
 * Consumption is acknowledged: after the listeners took a batch (its alerts are appended to
 * the spool, which writes them at the end of the same event-loop turn), the acknowledgement
 * is written at the end of that turn, and only then does the drain give the batch's ring
 * space back to the kernel and mark its swept bursts. `holdAcks()` defers it further (the
 * loader holds events until its first sync). A process killed before that leaves the
 * events to the next agent. After a drain failed the new one starts where the handled
 * batches end; batches handled after that may be delivered twice, never lost.
 */
import type { Logger } from "../log.ts";
import type { KernelEvent, RingGate } from "./contract.ts";
import { eventAt } from "./event-decode.ts";
import { packedBatch, type RecordBatch } from "./event-record.ts";
import { type DrainedBatch, type RingDrainData, runDrain } from "./ring-drain.ts";
import { ACK, CONTROL, READING } from "./ring-words.ts";

/** How often a held or paused consumer looks at its gate again. */
const GATE_POLL_MS = 50;

export interface RingConsumerOptions {
  data: Omit<RingDrainData, "maxBatch" | "coalesceMs" | "finalAckTimeoutMs">;
  /** Events per batch, at most. Default 256. */
  maxBatch?: number;
  /** RingDrainData.coalesceMs. Default 5 ms. */
  coalesceMs?: number;
  /** Delay before a failed drain is replaced. Default 1 s. */
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
  /** Of `delivered`, bursts an earlier agent opened (RingDrainData.adoptedBeforeNs). */
  backlog = 0n;
  /** Drains that failed and were replaced. */
  restarts = 0;
  private readonly control = new SharedArrayBuffer(4 * CONTROL.words);
  private readonly words = new Int32Array(this.control);
  private readonly options: RingConsumerOptions;
  /** The running drain, settled once it stopped or failed; undefined before start(). */
  private running: Promise<void> | undefined;
  private stopping = false;
  /** Why the consumer is not running, while it is not. */
  private down: string | undefined;
  private ready: Promise<void>;
  private resolveReady: () => void = () => undefined;
  /** The newest batch handled and not yet acknowledged (of the drain owning `acks`). */
  private unacked: { acks: BigInt64Array; seq: number; ringPos: bigint } | undefined;
  /** The ring position after the last batch acknowledged, whichever drain read it. */
  private ackedPos = 0n;
  private ackScheduled = false;
  private holds = 0;
  private gateTimer: NodeJS.Timeout | undefined;
  private heldByGate = false;
  /** The stopping drain's acknowledgement words, once it drained. */
  private finalAcks: BigInt64Array | undefined;
  /** Keeps the process alive while the drain runs (its sleeps alone do not), as a reading thread did. */
  private keepAlive: NodeJS.Timeout | undefined;
  private failNext = false;

  /** Reads nothing before start(): the listeners, holds and gate come first. */
  constructor(options: RingConsumerOptions) {
    this.options = options;
    this.ready = new Promise((resolve) => {
      this.resolveReady = resolve;
    });
  }

  /** Resolves once a drain reads the ring buffer (events before that wait in it). */
  whenReady(): Promise<void> {
    return this.ready;
  }

  /** Not ok while no drain reads the ring buffer (between a failure and the replacement), or the gate holds it. */
  health(): { ok: boolean; message?: string } {
    if (this.down !== undefined) return { ok: false, message: this.down };
    const gated = this.gated();
    return gated === undefined ? { ok: true } : { ok: false, message: gated };
  }

  /** Starts reading the ring: the first batch is read on the next turn of the event loop. Idempotent. */
  start(): void {
    if (this.running || this.stopping) return;
    this.keepAlive ??= setInterval(() => undefined, 2 ** 31 - 1);
    this.run();
  }

  private run(): void {
    const acks = new BigInt64Array(new SharedArrayBuffer(8 * ACK.words));
    acks[ACK.pos] = BigInt.asIntN(64, this.ackedPos);
    const data: RingDrainData = {
      ...this.options.data,
      maxBatch: this.options.maxBatch ?? 256,
      coalesceMs: this.options.coalesceMs ?? 5,
      finalAckTimeoutMs: 10_000,
    };
    Atomics.store(this.words, CONTROL.unread, -1); // unknown until the new drain has looked
    const sink = {
      ready: () => {
        this.down = undefined;
        this.resolveReady();
      },
      batch: (b: DrainedBatch) => this.onBatch(acks, b),
      drained: () => {
        this.finalAcks = acks;
        if (this.holds > 0 || this.heldByGate) this.leaveToNextAgent();
      },
    };
    const fault = () => {
      const fail = this.failNext;
      this.failNext = false;
      return fail;
    };
    const running = runDrain(data, { control: this.words, acks }, sink, fault);
    this.running = running.then(
      () => undefined,
      (error: unknown) => this.failed(error),
    );
  }

  /** A batch from the drain: to the listeners, then acknowledged at the end of the turn. */
  private onBatch(acks: BigInt64Array, b: DrainedBatch): void {
    this.backlog += BigInt(b.backlog);
    this.handle(b.records, b.count);
    this.unacked = { acks, seq: b.seq, ringPos: b.ringPos };
    this.scheduleAck();
  }

  /** The drain failed: not ready, and a new drain starts after the delay where the handled batches end. */
  private failed(error: unknown): void {
    this.resolveReady();
    if (this.stopping) {
      this.options.logger?.error("ring buffer drain failed while stopping", { error });
      return;
    }
    this.down = `the ring buffer drain failed (${error instanceof Error ? error.message : String(error)}); replacing it`;
    this.restarts++;
    this.options.logger?.error("ring buffer drain failed; replacing it", { error });
    // Events wait in the ring buffer meanwhile (and are counted lost if it fills).
    setTimeout(() => {
      if (!this.stopping) this.run();
    }, this.options.restartDelayMs ?? 1000);
  }

  private handle(records: ArrayBuffer, count: number): void {
    this.delivered += BigInt(count); // once per batch: a bigint add allocates
    // One view of the batch; each event is read in place from it (no copy per event).
    const batch = packedBatch(records, count);
    const { offsets } = batch;
    const onEvent = this.options.onEvent;
    for (let i = 0; i < count; i++) {
      const at = offsets[i] as number;
      onEvent(eventAt(batch, at), batch, at);
    }
    this.applyGate();
  }

  /** Sets how the drain may read from what the gate says now. */
  private applyGate(): void {
    const gate = this.options.gate;
    const want = gate?.full() ? READING.paused : READING.free;
    const was = Atomics.load(this.words, CONTROL.reading);
    if (want !== was) {
      Atomics.store(this.words, CONTROL.reading, want);
      Atomics.notify(this.words, CONTROL.reading);
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

  /** While the gate holds or pauses the ring: looks again every GATE_POLL_MS until it lets go. */
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

  /** Bytes of the ring not released to the kernel, as the drain last saw them. */
  ringUsedBytes(): number {
    return Atomics.load(this.words, CONTROL.ringUsed);
  }

  /**
   * True when every record in the ring as of the drain's last look was read and handed to
   * the listeners (an earlier agent's backlog included); false while that is not known.
   */
  drained(): boolean {
    return Atomics.load(this.words, CONTROL.unread) === 0;
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

  /** Held events are not consumed: the stopping drain leaves them in the ring for the next agent. */
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

  /** Stops the drain after its last read; every batch it read is handled before this resolves. */
  async stop(): Promise<void> {
    this.stopping = true;
    clearInterval(this.gateTimer);
    this.gateTimer = undefined;
    Atomics.store(this.words, CONTROL.stop, 1);
    Atomics.notify(this.words, CONTROL.stop);
    Atomics.notify(this.words, CONTROL.reading);
    // A failed drain being replaced has nothing left to hand over: run() is not called again.
    await this.running;
    clearInterval(this.keepAlive);
    this.keepAlive = undefined;
  }

  /** Fails the running drain at its next turn (tests: a failed drain is replaced). */
  injectFailure(): void {
    this.failNext = true;
  }
}
