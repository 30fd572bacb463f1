import { describe, expect, it } from "vitest";
import { createTrapRateLimiter, type RateKey } from "./rate-limit.ts";

const key = (trapId: string, exe = "/usr/bin/cat", container = "c1"): RateKey => ({ trapId, container, exe });

describe("rate limit per trap × container × executable", () => {
  it("lets a burst through, suppresses the rest, and reports the count in the next allowed alert", () => {
    let now = 0;
    const limiter = createTrapRateLimiter({ perSecond: 2, burst: 3, now: () => now });
    const decisions = Array.from({ length: 10 }, () => limiter.take(key("hot")));
    expect(decisions.filter((d) => d.allowed)).toHaveLength(3);
    expect(limiter.pending().get("hot")).toBe(7);
    now += 500; // one token back
    expect(limiter.take(key("hot"))).toEqual({ allowed: true, suppressed: 7 });
    expect(limiter.take(key("hot")).allowed).toBe(false);
    now += 500;
    expect(limiter.take(key("hot"))).toEqual({ allowed: true, suppressed: 1 });
  });

  it("keeps traps independent", () => {
    const limiter = createTrapRateLimiter({ perSecond: 1, burst: 1, now: () => 0 });
    expect(limiter.take(key("a")).allowed).toBe(true);
    expect(limiter.take(key("a")).allowed).toBe(false);
    expect(limiter.take(key("b"))).toEqual({ allowed: true, suppressed: 0 });
  });

  it("a decoy executable in a loop empties only its own bucket: another executable or container still alerts", () => {
    const limiter = createTrapRateLimiter({ perSecond: 1, burst: 2, now: () => 0 });
    for (let i = 0; i < 1000; i++) limiter.take(key("shadow", "/usr/bin/cat", "noisy"));
    expect(limiter.take(key("shadow", "/usr/bin/cat", "noisy")).allowed).toBe(false);
    expect(limiter.take(key("shadow", "/usr/bin/python3", "noisy"))).toEqual({
      allowed: true,
      suppressed: 0,
    });
    expect(limiter.take(key("shadow", "unknown", "noisy")).allowed).toBe(true);
    expect(limiter.take(key("shadow", "/usr/bin/cat", "quiet")).allowed).toBe(true);
    expect(limiter.pending().get("shadow")).toBe(999);
  });

  it("alerts a key's first access in each window even when its bucket is empty, with what it suppressed", () => {
    let now = 0;
    const limiter = createTrapRateLimiter({ perSecond: 0.001, burst: 1, windowMs: 10_000, now: () => now });
    expect(limiter.take(key("t")).allowed).toBe(true);
    for (let i = 0; i < 5; i++) expect(limiter.take(key("t")).allowed).toBe(false);
    now = 9_999;
    expect(limiter.take(key("t")).allowed).toBe(false);
    now = 10_000;
    expect(limiter.take(key("t"))).toEqual({ allowed: true, suppressed: 6 });
    expect(limiter.take(key("t")).allowed).toBe(false);
  });

  it("bounds the keys a container can create, and keeps an evicted key's suppressed count for its trap", () => {
    const limiter = createTrapRateLimiter({ perSecond: 1, burst: 1, maxKeys: 100, now: () => 0 });
    limiter.take(key("t", "/usr/bin/cat"));
    limiter.take(key("t", "/usr/bin/cat")); // suppressed: 1
    const hostile = Array.from({ length: 10_000 }, (_, i) =>
      limiter.take(key("u", `/tmp/copy-${i}`, "hostile")),
    );
    expect(hostile.every((d) => d.allowed && d.suppressed === 0)).toBe(true);
    expect(limiter.size()).toBe(100);
    expect(limiter.pending().get("t")).toBe(1);
    // The evicted key's count travels in the trap's next alert, whichever key raises it.
    expect(limiter.take(key("t", "/usr/bin/vi"))).toEqual({ allowed: true, suppressed: 1 });
    expect(limiter.pending().get("t")).toBeUndefined();
  });

  it("keeps a key in use while evicting the least recently used ones", () => {
    const limiter = createTrapRateLimiter({ perSecond: 1, burst: 1, maxKeys: 3, now: () => 0 });
    limiter.take(key("t", "/a"));
    limiter.take(key("t", "/a")); // suppressed
    for (let i = 0; i < 10; i++) {
      limiter.take(key("t", `/other-${i}`));
      expect(limiter.take(key("t", "/a")).allowed).toBe(false); // still its empty bucket: not evicted
    }
    expect(limiter.pending().get("t")).toBe(11);
  });

  it("refuses options that would let nothing through", () => {
    expect(() => createTrapRateLimiter({ perSecond: 0 })).toThrow(RangeError);
    expect(() => createTrapRateLimiter({ maxKeys: 0 })).toThrow(RangeError);
    expect(() => createTrapRateLimiter({ windowMs: 0 })).toThrow(RangeError);
  });
});
