import { describe, expect, it } from "vitest";
import { locateRecord, type RecordPlace } from "./ring-reader.ts";

describe("a record of a ring mapped once", () => {
  // 64 bytes of data, each byte its own offset: what a record holds says where it was read.
  const data = Buffer.from(Array.from({ length: 64 }, (_, i) => i));
  const scratch = { bytes: Buffer.alloc(0) };
  const out: RecordPlace = { bytes: Buffer.alloc(0), offset: 0 };
  const bytesOf = (place: RecordPlace, length: number) => [
    ...place.bytes.subarray(place.offset, place.offset + length),
  ];

  it("is read in place when it ends before the data does", () => {
    const place = locateRecord(data, 8, 16, scratch, out);
    expect(bytesOf(place, 16)).toEqual(Array.from({ length: 16 }, (_, i) => 8 + i));
    expect(place.bytes).toBe(data);
  });

  it("that wraps past the end is joined: the end's bytes, then the start's", () => {
    expect(bytesOf(locateRecord(data, 56, 16, scratch, out), 16)).toEqual([
      56, 57, 58, 59, 60, 61, 62, 63, 0, 1, 2, 3, 4, 5, 6, 7,
    ]);
    // A header in the last 8 bytes puts the record's first byte at the data's end: it starts at 0.
    expect(bytesOf(locateRecord(data, 64, 4, scratch, out), 4)).toEqual([0, 1, 2, 3]);
  });

  it("joins every straddling offset whole, whatever the scratch held before", () => {
    for (let start = 40; start < 64; start++) {
      const place = locateRecord(data, start, 30, scratch, out);
      expect(bytesOf(place, 30)).toEqual(Array.from({ length: 30 }, (_, i) => (start + i) % 64));
    }
  });
});
