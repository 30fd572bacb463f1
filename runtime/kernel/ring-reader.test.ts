import { describe, expect, it } from "vitest";
import { recordAt } from "./ring-reader.ts";

describe("a record of a ring mapped once", () => {
  // 64 bytes of data, each byte its own offset: what a record holds says where it was read.
  const data = Uint8Array.from({ length: 64 }, (_, i) => i);
  const scratch = { bytes: new Uint8Array(0) };

  it("is read in place when it ends before the data does", () => {
    const record = recordAt(data, 8, 16, scratch);
    expect([...record]).toEqual(Array.from({ length: 16 }, (_, i) => 8 + i));
    expect(record.buffer).toBe(data.buffer);
  });

  it("that wraps past the end is joined: the end's bytes, then the start's", () => {
    expect([...recordAt(data, 56, 16, scratch)]).toEqual([
      56, 57, 58, 59, 60, 61, 62, 63, 0, 1, 2, 3, 4, 5, 6, 7,
    ]);
    // A header in the last 8 bytes puts the record's first byte at the data's end: it starts at 0.
    expect([...recordAt(data, 64, 4, scratch)]).toEqual([0, 1, 2, 3]);
  });

  it("joins every straddling offset whole, whatever the scratch held before", () => {
    for (let start = 40; start < 64; start++) {
      const record = recordAt(data, start, 30, scratch);
      expect([...record]).toEqual(Array.from({ length: 30 }, (_, i) => (start + i) % 64));
    }
  });
});
