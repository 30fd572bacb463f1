/**
 * The ring worker's outgoing batch (ring-worker.ts): raw hive_event records copied out of the
 * ring, posted to the main thread as one transferred buffer, and the swept bursts each posted
 * batch carries, to be marked in the kernel once the batch is acknowledged.
 */
import { EVENT_LAYOUT } from "./layout.ts";
import { CONTROL } from "./ring-consumer.ts";
import type { RingWorkerMessage } from "./ring-worker.ts";

const SIZE = EVENT_LAYOUT.size;

/** A swept burst: its thread id and first-check time (hive_swept's key and value). */
export type SweptMark = [pid: number, ktimeNs: bigint];

export class RingBatch {
  /** Records in the batch, and of them: swept here, and opened before the agent adopted the ring. */
  count = 0;
  swept = 0;
  backlog = 0;
  /** Records read from the ring and dropped: bursts a sweep had posted already. */
  duplicates = 0;
  /** The last posted batch's number (what ACK.seq acknowledges). */
  seq = 0;
  // Raw records, posted as one transferred buffer: decoding into objects here and cloning
  // them across threads cost more than decoding on the main thread.
  private records = Buffer.alloc(SIZE * 1024);
  private postedPos: bigint;
  private marks: SweptMark[] = [];
  /** Swept bursts by posted batch, marked in the kernel once their batch is acknowledged. */
  private readonly unmarked: { seq: number; marks: SweptMark[] }[] = [];
  private readonly control: Int32Array;
  private readonly post: (message: RingWorkerMessage, transfer?: ArrayBuffer[]) => void;

  constructor(
    startPos: bigint,
    control: Int32Array,
    post: (message: RingWorkerMessage, transfer?: ArrayBuffer[]) => void,
  ) {
    this.postedPos = startPos;
    this.control = control;
    this.post = post;
  }

  /**
   * Copies the record of `length` bytes at `offset` of `bytes` into the batch; `backlog`: its
   * burst was opened before this agent adopted the ring.
   */
  append(bytes: Buffer, offset: number, length: number, backlog: boolean): void {
    // Every record is a whole struct hive_event (bpf_ringbuf_output of it): anything shorter
    // is a misread of the ring, never to be posted as an event made of stale bytes.
    if (length < SIZE) throw new RangeError(`ring record of ${length} bytes, expected ${SIZE}`);
    if (backlog) this.backlog++;
    if ((this.count + 1) * SIZE > this.records.length) {
      const bigger = Buffer.alloc(this.records.length * 2);
      this.records.copy(bigger, 0, 0, this.count * SIZE);
      this.records = bigger;
    }
    bytes.copy(this.records, this.count * SIZE, offset, offset + SIZE);
    this.count++;
  }

  /** A burst this batch carries from a sweep: the kernel learns it when the batch is acknowledged. */
  addMark(pid: number, ktimeNs: bigint): void {
    this.marks.push([pid, ktimeNs]);
  }

  /** Posts the batch, read up to ring position `position`, and starts the next. */
  flush(position: bigint): void {
    // Duplicates alone still move the ring position: posted (empty) so that it is released.
    if (this.count === 0 && position === this.postedPos) return;
    const records = this.records.buffer.slice(
      this.records.byteOffset,
      this.records.byteOffset + this.count * SIZE,
    );
    Atomics.add(this.control, CONTROL.inFlight, this.count);
    this.seq++;
    this.postedPos = position;
    if (this.marks.length > 0) this.unmarked.push({ seq: this.seq, marks: this.marks });
    this.marks = [];
    const { count, seq, swept, duplicates, backlog } = this;
    this.post({ type: "events", records, count, seq, ringPos: position, swept, duplicates, backlog }, [
      records,
    ]);
    this.count = 0;
    this.swept = 0;
    this.duplicates = 0;
    this.backlog = 0;
  }

  /** The marks of the oldest batch acknowledged (seq ≤ `acked`) not yet taken; undefined when none. */
  takeAckedMarks(acked: number): SweptMark[] | undefined {
    if (this.unmarked.length === 0 || (this.unmarked[0]?.seq ?? Infinity) > acked) return undefined;
    return this.unmarked.shift()?.marks ?? [];
  }
}
