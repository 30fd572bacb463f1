/**
 * Events read in place from a ring batch and kept past their delivery (held until the first
 * sync, parked until their container is named) hold their own bytes: the batch's buffer is
 * neither kept alive by them nor read again after the batch is gone.
 */
import { describe, expect, it } from "vitest";
import type { KernelWatcher } from "../kernel/contract.ts";
import { eventAt } from "../kernel/event-decode.ts";
import { EVENT_LAYOUT as L, recordBatch } from "../kernel/event-record.ts";
import { createAttributionRetry } from "./attribution-retry.ts";
import { HeldEvents } from "./held-events.ts";

/** A batch of two records, of threads 101 and 202, their commands "first" and "second". */
const batchOfTwo = () => {
  const bytes = Buffer.alloc(2 * L.size);
  bytes.writeUInt32LE(101, L.pid);
  bytes.write("first", L.comm);
  bytes.writeUInt32LE(202, L.size + L.pid);
  bytes.write("second", L.size + L.comm);
  return recordBatch(bytes);
};

describe("events kept past their delivery", () => {
  it("held until the first sync, keep their own record", () => {
    const batch = batchOfTwo();
    const held = new HeldEvents({
      kernel: {} as KernelWatcher,
      max: 10,
      holdAcksNow: false,
      stats: { heldEvents: 0, heldEventsDropped: 0 },
    });
    held.hold(eventAt(batch, 0));
    held.hold(eventAt(batch, L.size));
    batch.bytes.fill(0xff); // the batch's buffer is handed back and written again
    const routed: string[] = [];
    held.release((e) => routed.push(`${e.pid} ${e.comm}`)); // comm is read from the record when asked
    expect(routed).toEqual(["101 first", "202 second"]);
  });

  it("parked until their container is named, keep their own record", () => {
    const batch = batchOfTwo();
    const given: string[] = [];
    const retry = createAttributionRetry({
      retry: () => false,
      giveUp: (e) => given.push(`${e.pid} ${e.comm}`),
    });
    retry.park(eventAt(batch, L.size));
    batch.bytes.fill(0xff);
    retry.stop();
    expect(given).toEqual(["202 second"]);
  });
});
