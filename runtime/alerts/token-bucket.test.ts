import { describe, expect, it } from "vitest";
import { TokenBucket } from "./token-bucket.ts";

describe("token bucket", () => {
  it("starts full, empties, and refills at its rate up to its burst", () => {
    let now = 0;
    const bucket = new TokenBucket(2, 3, () => now);
    expect([bucket.take(), bucket.take(), bucket.take(), bucket.take()]).toEqual([true, true, true, false]);
    now = 499;
    expect(bucket.take()).toBe(false);
    now = 600;
    expect(bucket.take()).toBe(true);
    now = 60_000;
    expect([bucket.take(), bucket.take(), bucket.take(), bucket.take()]).toEqual([true, true, true, false]);
  });
});
