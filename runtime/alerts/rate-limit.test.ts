import { describe, expect, it } from "vitest";
import { createTrapRateLimiter } from "./rate-limit.ts";

describe("per-trap rate limit", () => {
  it("lets a burst through, suppresses the rest, and reports the count in the next allowed alert", () => {
    let now = 0;
    const limiter = createTrapRateLimiter({ perSecond: 2, burst: 3, now: () => now });
    const decisions = Array.from({ length: 10 }, () => limiter.take("hot"));
    expect(decisions.filter((d) => d.allowed)).toHaveLength(3);
    expect(limiter.pending().get("hot")).toBe(7);
    now += 500; // one token back
    expect(limiter.take("hot")).toEqual({ allowed: true, suppressed: 7 });
    expect(limiter.take("hot").allowed).toBe(false);
    now += 500;
    expect(limiter.take("hot")).toEqual({ allowed: true, suppressed: 1 });
  });

  it("keeps traps independent", () => {
    const limiter = createTrapRateLimiter({ perSecond: 1, burst: 1, now: () => 0 });
    expect(limiter.take("a").allowed).toBe(true);
    expect(limiter.take("a").allowed).toBe(false);
    expect(limiter.take("b")).toEqual({ allowed: true, suppressed: 0 });
  });
});
