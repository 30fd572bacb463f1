/**
 * The ring drain's outgoing batch (ring-drain.ts): raw hive_event records, handed to the consumer
 * as one buffer of its own, and the swept bursts each batch carries, to be marked in the kernel
 * once the batch is acknowledged.
 *
 * Records read from the ring are not copied one by one: the batch notes where each is, and at
 * the handover copies the ring's bytes from its first record to its last in one piece (records that
 * are not posted, duplicates, ride along unreferenced). Swept records, which come from a map,
 * are copied after them. The posted buffer ends with each record's offset (event-record.ts
 * packedBatch).
 */

import { EVENT_LAYOUT } from "./layout.ts";
import type { DrainedBatch } from "./ring-drain.ts";
import type { RingReader } from "./ring-reader.ts";

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
  /**
   * Each record in order: where its bytes start in the ring counted from `postedPos` (≥ 0), or
   * −(k + 1) for the k-th record in `sweptRecords`. Reused from batch to batch.
   */
  private readonly places: number[] = [];
  /** Where the ring read being noted began, counted from `postedPos` (readFrom). */
  private readBase = 0;
  private sweptRecords = Buffer.alloc(SIZE * 16);
  /** Records in `sweptRecords`. */
  private sweptCount = 0;
  private postedPos: bigint;
  private marks: SweptMark[] = [];
  /** Swept bursts by posted batch, marked in the kernel once their batch is acknowledged. */
  private readonly unmarked: { seq: number; marks: SweptMark[] }[] = [];
  private readonly post: (batch: DrainedBatch) => void;

  constructor(startPos: bigint, post: (batch: DrainedBatch) => void) {
    this.postedPos = startPos;
    this.post = post;
  }

  /** The ring reads noted next (noteRead) begin at ring position `position`. */
  readFrom(position: bigint): void {
    this.readBase = Number(position - this.postedPos);
  }

  /**
   * Notes a record read from the ring, `length` bytes starting `at` bytes after where the read
   * began (RingReader.consume); `backlog`: its burst was opened before this agent adopted the ring.
   */
  noteRead(at: number, length: number, backlog: boolean): void {
    checkLength(length);
    if (backlog) this.backlog++;
    this.places.push(this.readBase + at);
    this.count++;
  }

  /** Copies in a record that is not in the ring (a swept burst's, from hive_bursts). */
  append(bytes: Buffer, offset: number, length: number, backlog: boolean): void {
    checkLength(length);
    if (backlog) this.backlog++;
    const k = this.sweptCount++;
    if ((k + 1) * SIZE > this.sweptRecords.length) {
      const bigger = Buffer.alloc(this.sweptRecords.length * 2);
      this.sweptRecords.copy(bigger, 0, 0, k * SIZE);
      this.sweptRecords = bigger;
    }
    bytes.copy(this.sweptRecords, k * SIZE, offset, offset + SIZE);
    this.places.push(-(k + 1));
    this.count++;
  }

  /** A burst this batch carries from a sweep: the kernel learns it when the batch is acknowledged. */
  addMark(pid: number, ktimeNs: bigint): void {
    this.marks.push([pid, ktimeNs]);
  }

  /** Posts the batch, read from `reader` up to its position, and starts the next. */
  flush(reader: Pick<RingReader, "position" | "copyOut">): void {
    const position = reader.position;
    // Duplicates alone still move the ring position: posted (empty) so that it is released.
    if (this.count === 0 && position === this.postedPos) return;
    const records = this.pack(reader);
    this.seq++;
    if (this.marks.length > 0) this.unmarked.push({ seq: this.seq, marks: this.marks });
    this.marks = [];
    const { count, seq, swept, duplicates, backlog } = this;
    this.post({ records, count, seq, ringPos: position, swept, duplicates, backlog });
    this.postedPos = position;
    this.places.length = 0;
    this.sweptCount = 0;
    this.count = 0;
    this.swept = 0;
    this.duplicates = 0;
    this.backlog = 0;
  }

  /** Ring records (one copy from the first to the last), then swept ones, then the offsets. */
  private pack(reader: Pick<RingReader, "copyOut">): ArrayBuffer {
    const { places, count } = this;
    let first = -1;
    let end = 0;
    for (const place of places) {
      if (place < 0) continue;
      if (first < 0) first = place;
      end = place + SIZE;
    }
    const ringBytes = first < 0 ? 0 : end - first;
    const sweptBytes = this.sweptCount * SIZE;
    // The layout event-record.ts packedBatch reads: records, padded to 4, then the offsets.
    const offsetsAt = (ringBytes + sweptBytes + 3) & ~3;
    const records = new ArrayBuffer(offsetsAt + count * 4);
    const bytes = new Uint8Array(records);
    if (first >= 0) reader.copyOut(this.postedPos + BigInt(first), ringBytes, bytes, 0);
    if (sweptBytes > 0) this.sweptRecords.copy(bytes, ringBytes, 0, sweptBytes);
    const offsets = new Int32Array(records, offsetsAt, count);
    for (let i = 0; i < count; i++) {
      const place = places[i] as number;
      offsets[i] = place >= 0 ? place - first : ringBytes + (-place - 1) * SIZE;
    }
    return records;
  }

  /** The marks of the oldest batch acknowledged (seq ≤ `acked`) not yet taken; undefined when none. */
  takeAckedMarks(acked: number): SweptMark[] | undefined {
    if (this.unmarked.length === 0 || (this.unmarked[0]?.seq ?? Infinity) > acked) return undefined;
    return this.unmarked.shift()?.marks ?? [];
  }
}

// Every record is a whole struct hive_event (bpf_ringbuf_output of it): anything shorter is a
// misread of the ring, never to be posted as an event made of stale bytes.
function checkLength(length: number): void {
  if (length < SIZE) throw new RangeError(`ring record of ${length} bytes, expected ${SIZE}`);
}
