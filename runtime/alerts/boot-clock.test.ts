import { describe, expect, it } from "vitest";
import { createBootClock } from "./boot-clock.ts";

describe("boot clock", () => {
  it("turns the current CLOCK_MONOTONIC into the current wall-clock time", () => {
    const clock = createBootClock();
    const before = Date.now();
    const ms = clock.toEpochMs(clock.nowKtimeNs());
    const after = Date.now();
    expect(ms).toBeGreaterThanOrEqual(before - 2);
    expect(ms).toBeLessThanOrEqual(after + 2);
  });

  it("formats RFC 3339 UTC with microseconds from a known offset", () => {
    const clock = createBootClock(1_700_000_000_000_000_000n);
    expect(clock.toIso(123_456_789n)).toBe("2023-11-14T22:13:20.123456Z");
    expect(clock.toIso(0n)).toBe("2023-11-14T22:13:20.000000Z");
  });
});
