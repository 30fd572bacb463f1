/**
 * Per-trap rate limit: a token bucket per trap id. An access over the limit is not turned
 * into an alert; it is counted, and the count travels in the trap's next alert as
 * `suppressed`, so a hot file can flood neither the receiver nor the agent and the
 * receiver still learns how much it did not see.
 */
export interface RateLimitOptions {
  /** Sustained alerts per second per trap; default 100. */
  perSecond?: number;
  /** Bucket size: alerts a trap may raise at once after a quiet period; default 2 × perSecond. */
  burst?: number;
  /** Time source in milliseconds (tests); default performance.now. */
  now?: () => number;
}

export interface RateDecision {
  allowed: boolean;
  /** When allowed: accesses suppressed since this trap's previous alert (reset to 0 by this call). */
  suppressed: number;
}

export interface TrapRateLimiter {
  take(trapId: string): RateDecision;
  /** Suppressed counts not yet reported in an alert, by trap (for the shutdown log). */
  pending(): Map<string, number>;
}

interface Bucket {
  tokens: number;
  at: number;
  suppressed: number;
}

export function createTrapRateLimiter(options: RateLimitOptions = {}): TrapRateLimiter {
  const perSecond = options.perSecond ?? 100;
  const burst = options.burst ?? perSecond * 2;
  const now = options.now ?? (() => performance.now());
  if (!(perSecond > 0) || !(burst >= 1))
    throw new RangeError("rate limit needs perSecond > 0 and burst >= 1");
  const buckets = new Map<string, Bucket>();
  return {
    take(trapId) {
      const t = now();
      let bucket = buckets.get(trapId);
      if (!bucket) {
        bucket = { tokens: burst, at: t, suppressed: 0 };
        buckets.set(trapId, bucket);
      } else {
        bucket.tokens = Math.min(burst, bucket.tokens + ((t - bucket.at) / 1000) * perSecond);
        bucket.at = t;
      }
      if (bucket.tokens < 1) {
        bucket.suppressed++;
        return { allowed: false, suppressed: bucket.suppressed };
      }
      bucket.tokens -= 1;
      const suppressed = bucket.suppressed;
      bucket.suppressed = 0;
      return { allowed: true, suppressed };
    },
    pending() {
      const out = new Map<string, number>();
      for (const [trap, b] of buckets) if (b.suppressed > 0) out.set(trap, b.suppressed);
      return out;
    },
  };
}
