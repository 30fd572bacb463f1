import { describe, expect, it } from "vitest";
import { makeEvent } from "../../test/alerts/fixtures.ts";
import type { KernelEvent } from "./contract.ts";
import { FloodSummaries } from "./flood-summaries.ts";

/**
 * An event of a flood key (cgroup 7, the fixture's executable, slot 3 unless overridden) carrying
 * cumulative held counts; its key as the kernel would give it, from those fields.
 */
const keyed = (n: number, bursts: bigint, checks: bigint, overrides: Partial<KernelEvent> = {}) => {
  const event = makeEvent(n, {
    cgroupId: 7n,
    slot: 3,
    kind: "file",
    heldTotal: { bursts, checks },
    ...overrides,
  });
  return { ...event, floodKey: `${event.cgroupId}:${event.slot}:${event.process.exe.exe}` };
};

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
    const parent = keyed(1, 9n, 9n, { kind: "parent" });
    flood.annotate(parent);
    expect(parent.summarized).toBeUndefined();
  });
});
