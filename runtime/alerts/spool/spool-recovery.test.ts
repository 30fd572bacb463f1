import { describe, expect, it } from "vitest";
import { frameAck, frameRecord, HEADER_BYTES, type SpoolRecord, segmentFileName } from "./spool-format.ts";
import {
  ackedIndexes,
  decodeLog,
  type RecoveredSegment,
  segmentNumbers,
  undeliveredOf,
} from "./spool-recovery.ts";

const record = (n: number): SpoolRecord => ({
  id: `id-${n}`,
  url: "http://127.0.0.1:9/alerts",
  trapId: "trap-a",
  createdMs: 1_700_000_000_000 + n,
  body: `{"n":${n}}`,
});
const log = (...records: SpoolRecord[]) => Buffer.concat(records.map(frameRecord));

describe("spool recovery steps", () => {
  it("finds the segments among a directory's files, oldest first", () => {
    const names = [
      segmentFileName(10, "log"),
      "lock",
      segmentFileName(2, "ack"),
      segmentFileName(2, "log"),
      "x.log",
    ];
    expect(segmentNumbers(names)).toEqual([2, 10]);
  });

  it("decodes a whole log, and a log whose last record was torn mid-write without calling it corrupt", () => {
    const whole = log(record(1), record(2));
    expect(decodeLog(whole)).toMatchObject({ bytes: whole.length, corrupt: false });
    expect(decodeLog(whole).records.map((r) => r.id)).toEqual(["id-1", "id-2"]);
    const torn = decodeLog(whole.subarray(0, whole.length - 3));
    expect(torn.corrupt).toBe(false);
    expect(torn.scan).toMatchObject({ ok: false, torn: true });
    expect(torn.records.map((r) => r.id)).toEqual(["id-1"]);
  });

  it("keeps the records before damage in the middle of a log, and calls it corrupt", () => {
    const data = log(record(1), record(2), record(3));
    const second = frameRecord(record(1)).length;
    data[second] = 0; // the second record's magic
    const decoded = decodeLog(data);
    expect(decoded.corrupt).toBe(true);
    expect(decoded.records.map((r) => r.id)).toEqual(["id-1"]);
  });

  it("reads acknowledgements of the segment's own records only", () => {
    const payloads = [frameAck(0), frameAck(2), frameAck(7)].map((f) => f.subarray(HEADER_BYTES));
    expect([...ackedIndexes([...payloads, Buffer.from("xx")], 3)]).toEqual([0, 2]);
  });

  it("returns the records not acknowledged, with where their payloads are", () => {
    const decoded = decodeLog(log(record(1), record(2), record(3)));
    const seg: RecoveredSegment = {
      n: 4,
      stream: "http://127.0.0.1:9",
      logBytes: decoded.bytes,
      ackBytes: 0,
      records: 3,
      acked: new Set([1]),
    };
    const out = undeliveredOf(seg, decoded);
    expect(out.map((r) => r.id)).toEqual(["id-1", "id-3"]);
    const first = frameRecord(record(1)).length;
    expect(out[1]).toEqual({
      id: "id-3",
      url: "http://127.0.0.1:9/alerts",
      trapId: "trap-a",
      createdMs: 1_700_000_000_003,
      ref: { segment: 4, index: 2, offset: 2 * first + HEADER_BYTES, length: first - HEADER_BYTES },
      bytes: first,
    });
    expect(out[1]).not.toHaveProperty("body");
  });
});
