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

  it("leave control events alone", () => {
    const flood = new FloodSummaries(-1, 1_000_000_000n);
    expect(annotate(flood, keyed(1, 9n, 9n, { kind: KIND_PARENT })).summarized).toBeUndefined();
  });
});

describe("flood keys", () => {
  it("find one state from an event's record and from hive_flood's key of it", () => {
    const keys = new FloodKeys(4);
    const { bytes } = keyed(1, 0n, 0n);
    const state = keys.ofRecord(recordBatch(bytes), 0);
    expect(keys.ofMapKey(floodKeyOf(bytes))).toBe(state);
    expect(keys.ofRecord(recordBatch(keyed(2, 5n, 5n).bytes), 0)).toBe(state); // pid and counts are not the key
    expect(keys.ofRecord(recordBatch(keyed(1, 0n, 0n, { slot: 4 }).bytes), 0)).not.toBe(state);
  });

  it("keep a copy of each key's last record, and past the bound give the oldest key's up", () => {
    const keys = new FloodKeys(2);
    const batch = recordBatch(Buffer.concat([keyed(1, 0n, 0n).bytes, keyed(2, 0n, 0n, { slot: 4 }).bytes]));
    const a = keys.ofRecord(batch, 0);
    const b = keys.ofRecord(batch, L.size);
    keys.remember(a, batch, 0);
    keys.remember(b, batch, L.size);
    batch.bytes.fill(0); // the batch is reused: the copies stay
    expect(a.last?.readUInt32LE(L.pid)).toBe(1);
    expect(b.last?.readUInt32LE(L.pid)).toBe(2);
    const third = keyed(3, 0n, 0n, { slot: 5 });
    const c = keys.ofRecord(recordBatch(third.bytes), 0);
    keys.remember(c, recordBatch(third.bytes), 0);
    expect(a.last).toBeUndefined();
    expect(c.last?.readUInt32LE(L.pid)).toBe(3);
    keys.forget(floodKeyOf(third.bytes));
    expect(keys.ofRecord(recordBatch(third.bytes), 0)).not.toBe(c);
  });
});
