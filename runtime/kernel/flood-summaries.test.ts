import { describe, expect, it } from "vitest";
import type { KernelEvent } from "./contract.ts";
import { decodeEvent } from "./event-decode.ts";
import { recordBatch } from "./event-record.ts";
import { FloodKeys } from "./flood-keys.ts";
import { FloodSummaries } from "./flood-summaries.ts";
import { floodKeyOf, EVENT_LAYOUT as L } from "./layout.ts";
import { KIND_PARENT } from "./map-layouts.ts";

interface KeyFields {
  cgroupId?: bigint;
  slot?: number;
  exeIno?: bigint;
  kind?: number;
}

/**
 * A raw hive_event of a flood key (cgroup 7, executable inode 99, slot 3 unless overridden)
 * carrying cumulative held counts, by process `pid`, and its event as the ring consumer reads it.
 */
const keyed = (pid: number, bursts: bigint, checks: bigint, fields: KeyFields = {}) => {
  const bytes = Buffer.alloc(L.size);
  bytes.writeBigUInt64LE(fields.cgroupId ?? 7n, L.cgroup_id);
  bytes.writeUInt32LE(fields.slot ?? 3, L.slot);
  bytes.writeBigUInt64LE(fields.exeIno ?? 99n, L.exe_ino);
  bytes.writeUInt32LE(fields.kind ?? 0, L.kind);
  bytes.writeUInt32LE(pid, L.pid);
  bytes.writeBigUInt64LE(bursts, L.held_bursts);
  bytes.writeBigUInt64LE(checks, L.held_checks);
  return { bytes, event: decodeEvent(bytes) };
};
const annotate = (flood: FloodSummaries, e: ReturnType<typeof keyed>) => {
  flood.annotate(e.event, recordBatch(e.bytes), 0);
  return e.event;
};

describe("flood summaries", () => {
  it("report what the kernel held since the key's previous event, once", () => {
    const flood = new FloodSummaries(-1, 1_000_000_000n);
    expect(annotate(flood, keyed(1, 0n, 0n)).summarized).toBeUndefined();
    expect(annotate(flood, keyed(2, 40n, 120n)).summarized).toEqual({ bursts: 40, checks: 120 });
    expect(annotate(flood, keyed(3, 40n, 120n)).summarized).toBeUndefined();
  });

  it("keep keys apart: another cgroup, slot or executable has its own counts", () => {
    const flood = new FloodSummaries(-1, 1_000_000_000n);
    annotate(flood, keyed(1, 10n, 10n));
    expect(annotate(flood, keyed(2, 5n, 5n, { cgroupId: 8n })).summarized).toEqual({ bursts: 5, checks: 5 });
    expect(annotate(flood, keyed(3, 5n, 5n, { slot: 4 })).summarized).toEqual({ bursts: 5, checks: 5 });
    expect(annotate(flood, keyed(4, 5n, 5n, { exeIno: 98n })).summarized).toEqual({ bursts: 5, checks: 5 });
    expect(annotate(flood, keyed(5, 12n, 12n)).summarized).toEqual({ bursts: 2, checks: 2 });
  });

  it("take a swept burst's zeros for nothing new, and a restarted key's smaller totals as new", () => {
    const flood = new FloodSummaries(-1, 1_000_000_000n);
    annotate(flood, keyed(1, 30n, 30n));
    expect(annotate(flood, keyed(2, 0n, 0n)).summarized).toBeUndefined();
    expect(annotate(flood, keyed(3, 34n, 34n)).summarized).toEqual({ bursts: 4, checks: 4 });
    // The kernel entry was removed and made again: its totals start over.
    expect(annotate(flood, keyed(4, 6n, 6n)).summarized).toEqual({ bursts: 6, checks: 6 });
  });

  it("name the watched file in a summary whose key's last event was forgotten (it is routed by that file)", () => {
    const file = { major: 8, minor: 1, ino: 4242n };
    const flood = new FloodSummaries(-1, 1_000_000_000n, (slot) => (slot === 3 ? file : undefined));
    const bare = (
      flood as unknown as { summaryEvent: (last: undefined, at: object) => KernelEvent }
    ).summaryEvent(undefined, { cgroup: 7n, file: { major: 0, minor: 9, ino: 1n }, slot: 3, lastNs: 5n });
    expect(bare.key).toEqual(file);
    expect(bare.process.exe.source).toBe("unknown");
  });

  it("find a key's last event among the recent batches, with a record of its own", () => {
    const flood = new FloodSummaries(-1, 1_000_000_000n);
    const older = recordBatch(Buffer.concat([keyed(1, 0n, 0n).bytes, keyed(2, 0n, 0n, { slot: 4 }).bytes]));
    const newer = recordBatch(
      Buffer.concat([keyed(3, 0n, 0n).bytes, keyed(4, 0n, 0n, { kind: KIND_PARENT }).bytes]),
    );
    flood.keep(older);
    flood.keep(newer);
    const last = flood.lastEventOf(floodKeyOf(older.bytes, 0));
    expect(last?.pid).toBe(3); // the newest of its key; a control event is never one
    expect(flood.lastEventOf(floodKeyOf(older.bytes, L.size))?.pid).toBe(2);
    newer.bytes.fill(0); // its own record: the batch may go
    expect(last?.cgroupId).toBe(7n); // read from the record when asked
    expect(flood.lastEventOf(floodKeyOf(keyed(5, 0n, 0n, { slot: 9 }).bytes))).toBeUndefined();
  });

  it("keep the newest 4,096 events at least, in whole batches, and forget older ones", () => {
    const flood = new FloodSummaries(-1, 1_000_000_000n);
    const first = recordBatch(keyed(1, 0n, 0n, { slot: 7 }).bytes);
    flood.keep(first);
    const filler = recordBatch(
      Buffer.concat(Array.from({ length: 4096 }, (_, i) => keyed(10 + i, 0n, 0n).bytes)),
    );
    flood.keep(filler);
    expect(flood.lastEventOf(floodKeyOf(first.bytes))).toBeUndefined();
    expect(flood.lastEventOf(floodKeyOf(filler.bytes))?.pid).toBe(10 + 4095);
  });

  it("leave control events alone", () => {
    const flood = new FloodSummaries(-1, 1_000_000_000n);
    expect(annotate(flood, keyed(1, 9n, 9n, { kind: KIND_PARENT })).summarized).toBeUndefined();
  });
});

describe("flood keys", () => {
  it("find one state from an event's record and from hive_flood's key of it", () => {
    const keys = new FloodKeys();
    const { bytes } = keyed(1, 0n, 0n);
    const state = keys.ofRecord(recordBatch(bytes), 0);
    expect(keys.ofMapKey(floodKeyOf(bytes))).toBe(state);
    expect(keys.ofRecord(recordBatch(keyed(2, 5n, 5n).bytes), 0)).toBe(state); // pid and counts are not the key
    expect(keys.ofRecord(recordBatch(keyed(1, 0n, 0n, { slot: 4 }).bytes), 0)).not.toBe(state);
  });

  it("forget a key: found again, it starts over", () => {
    const keys = new FloodKeys();
    const { bytes } = keyed(1, 0n, 0n);
    const state = keys.ofRecord(recordBatch(bytes), 0);
    state.reported = true;
    keys.forget(floodKeyOf(bytes));
    const again = keys.ofRecord(recordBatch(bytes), 0);
    expect(again).not.toBe(state);
    expect(again.reported).toBe(false);
  });
});
