import { describe, expect, it } from "vitest";
import { packedBatch } from "./event-record.ts";
import { EVENT_LAYOUT } from "./layout.ts";
import { RingBatch } from "./ring-batch.ts";
import type { DrainedBatch } from "./ring-drain.ts";
import { copyRingBytes } from "./ring-reader.ts";

const SIZE = EVENT_LAYOUT.size;
const STRIDE = SIZE + 8; // header + record, 8-aligned, as the kernel lays records out

/**
 * A ring's data of `slots` records: record n (its header at n × STRIDE) has pid n, and the
 * reader's position is counted from `startPos`, as a ring that has wrapped before.
 */
function ringOf(slots: number, startPos: bigint) {
  const data = Buffer.alloc(slots * STRIDE);
  const size = BigInt(data.length);
  const write = (pos: bigint, pid: number) => {
    const record = Buffer.alloc(SIZE);
    record.writeUInt32LE(pid, EVENT_LAYOUT.pid);
    record.fill(pid & 0xff, EVENT_LAYOUT.comm, EVENT_LAYOUT.comm + 15);
    // Through the wrap as the kernel's double mapping would show it.
    for (let i = 0; i < SIZE; i++) data[Number((pos + 8n + BigInt(i)) % size)] = record[i] as number;
  };
  return {
    position: startPos,
    write,
    copyOut(from: bigint, length: number, target: Uint8Array, offset: number) {
      copyRingBytes(data, Number(from % size), length, target, offset);
    },
  };
}

function capture() {
  const posted: DrainedBatch[] = [];
  const post = (m: DrainedBatch) => {
    posted.push(m);
  };
  return { posted, post };
}

const pidsOf = (m: { records: ArrayBuffer; count: number }) => {
  const batch = packedBatch(m.records, m.count);
  return Array.from(batch.offsets, (at) => batch.view.getUint32(at + EVENT_LAYOUT.pid, true));
};

describe("a batch of ring records", () => {
  it("posts the noted records, not the skipped one, with a swept record in its place, whole across the ring's end", () => {
    const start = 3n * 4n * BigInt(STRIDE) - 2n * BigInt(STRIDE) + 100n; // two records before the end, unaligned
    const ring = ringOf(4, start);
    const { posted, post } = capture();
    const batch = new RingBatch(start, post);
    for (let n = 0; n < 4; n++) ring.write(start + BigInt(n * STRIDE), 10 + n);
    batch.readFrom(start);
    batch.noteRead(8, SIZE, false); // 10
    batch.duplicates++; // 11: a burst a sweep had posted
    batch.noteRead(2 * STRIDE + 8, SIZE, true); // 12, straddling the ring's end
    const swept = Buffer.alloc(SIZE);
    swept.writeUInt32LE(99, EVENT_LAYOUT.pid);
    batch.append(swept, 0, SIZE, false);
    batch.readFrom(start + BigInt(3 * STRIDE)); // a second read, later in the same batch
    batch.noteRead(8, SIZE, false); // 13
    ring.position = start + BigInt(4 * STRIDE);
    batch.flush(ring);
    expect(posted).toHaveLength(1);
    expect(posted[0]).toMatchObject({ count: 4, backlog: 1, duplicates: 1, ringPos: ring.position });
    expect(pidsOf(posted[0] as { records: ArrayBuffer; count: number })).toEqual([10, 12, 99, 13]);
    const b = packedBatch(posted[0]?.records as ArrayBuffer, 4);
    // The record across the end reads whole: its comm bytes all came from the same record.
    const at = b.offsets[1] as number;
    expect([...b.bytes.subarray(at + EVENT_LAYOUT.comm, at + EVENT_LAYOUT.comm + 15)]).toEqual(
      new Array(15).fill(12),
    );
  });

  it("starts the next batch where the last one ended, and posts a batch of duplicates alone empty, to release them", () => {
    const ring = ringOf(8, 0n);
    const { posted, post } = capture();
    const batch = new RingBatch(0n, post);
    for (let n = 0; n < 3; n++) ring.write(BigInt(n * STRIDE), n);
    batch.readFrom(0n);
    batch.noteRead(8, SIZE, false);
    ring.position = BigInt(STRIDE);
    batch.flush(ring);
    batch.readFrom(ring.position);
    batch.duplicates++;
    batch.noteRead(STRIDE + 8, SIZE, false);
    ring.position = BigInt(3 * STRIDE);
    batch.flush(ring);
    batch.readFrom(ring.position);
    batch.duplicates++;
    ring.position = BigInt(4 * STRIDE);
    batch.flush(ring);
    batch.flush(ring); // nothing read since: nothing posted
    expect(posted.map((m) => [m.seq, pidsOf(m)])).toEqual([
      [1, [0]],
      [2, [2]],
      [3, []],
    ]);
    expect(posted[2]?.records.byteLength).toBe(0);
  });

  it("refuses a record shorter than struct hive_event", () => {
    const { post } = capture();
    const batch = new RingBatch(0n, post);
    expect(() => batch.noteRead(8, SIZE - 8, false)).toThrow(/ring record of 888 bytes/);
  });
});
