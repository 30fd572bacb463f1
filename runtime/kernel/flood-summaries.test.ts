import { describe, expect, it } from "vitest";
import { makeEvent } from "../../test/alerts/fixtures.ts";
import type { KernelEvent } from "./contract.ts";
import { FloodSummaries } from "./flood-summaries.ts";

/** An event of flood key (cgroup 7, the fixture's executable, slot 3) carrying cumulative held counts. */
const keyed = (n: number, bursts: bigint, checks: bigint, overrides: Partial<KernelEvent> = {}) =>
  makeEvent(n, { cgroupId: 7n, slot: 3, kind: "file", heldTotal: { bursts, checks }, ...overrides });

describe("flood summaries", () => {
  it("report what the kernel held since the key's previous event, once", () => {
    const flood = new FloodSummaries(-1, 1_000_000_000n);
    const first = keyed(1, 0n, 0n);
    flood.annotate(first);
    expect(first.summarized).toBeUndefined();
    const second = keyed(2, 40n, 120n);
    flood.annotate(second);
    expect(second.summarized).toEqual({ bursts: 40, checks: 120 });
    const third = keyed(3, 40n, 120n);
    flood.annotate(third);
    expect(third.summarized).toBeUndefined();
  });

  it("keep keys apart: another cgroup, slot or executable has its own counts", () => {
    const flood = new FloodSummaries(-1, 1_000_000_000n);
    flood.annotate(keyed(1, 10n, 10n));
    const other = keyed(2, 5n, 5n, { cgroupId: 8n });
    flood.annotate(other);
    expect(other.summarized).toEqual({ bursts: 5, checks: 5 });
  });

  it("take a swept burst's zeros for nothing new, and a restarted key's smaller totals as new", () => {
    const flood = new FloodSummaries(-1, 1_000_000_000n);
    flood.annotate(keyed(1, 30n, 30n));
    const swept = keyed(2, 0n, 0n);
    flood.annotate(swept);
    expect(swept.summarized).toBeUndefined();
    const later = keyed(3, 34n, 34n);
    flood.annotate(later);
    expect(later.summarized).toEqual({ bursts: 4, checks: 4 });
    // The kernel entry was removed and made again: its totals start over.
    const restarted = keyed(4, 6n, 6n);
    flood.annotate(restarted);
    expect(restarted.summarized).toEqual({ bursts: 6, checks: 6 });
  });

  it("leave control events alone", () => {
    const flood = new FloodSummaries(-1, 1_000_000_000n);
    const parent = keyed(1, 9n, 9n, { kind: "parent" });
    flood.annotate(parent);
    expect(parent.summarized).toBeUndefined();
  });
});
