/**
 * Alert rate limit, keyed on trap × container × executable: a token bucket per key. An
 * access over its key's limit is not turned into an alert; it is counted, and the count
 * travels in that key's next alert as `suppressed`, so a hot file can flood neither the
 * receiver nor the agent and the receiver still learns how much it did not see.
 *
 * Keying on the executable (the kernel-recorded `exe`, or "unknown") is what keeps one noisy
 * reader from hiding another: a decoy reading the trap in a loop from one container empties
 * only its own bucket, never the bucket of another executable or another container. And the
 * first access of a key in each window alerts even when its bucket is empty, so a reader that
 * never stops still shows up (with its `suppressed` count) once per window.
 *
 * The key map is bounded (least recently used keys are evicted), so a container cannot grow
 * it without limit by running many executables; the suppressed count of an evicted key is
 * not lost: it is reported in the trap's next alert.
 */
export interface RateLimitOptions {
  /** Sustained alerts per second per trap × container × executable; default 100. */
  perSecond?: number;
  /** Bucket size: alerts a key may raise at once after a quiet period; default 2 × perSecond. */
  burst?: number;
  /** A key's first access in each window of this many ms alerts even with an empty bucket; default 60 000. */
  windowMs?: number;
  /** Most keys kept; beyond it the least recently used key is evicted; default 10 000. */
  maxKeys?: number;
  /** Time source in milliseconds (tests); default performance.now. */
  now?: () => number;
}

/** What one access is limited by. */
export interface RateKey {
  trapId: string;
  /** The container's id ("host" outside containers). */
  container: string;
  /** The executable as the kernel recorded it, or "unknown". */
  exe: string;
}

export interface RateDecision {
  allowed: boolean;
  /**
   * When allowed: accesses suppressed since this key's previous alert (plus those of evicted
   * keys of the same trap), reset to 0 by this call. When not allowed: the key's count so far.
   */
  suppressed: number;
}

export interface TrapRateLimiter {
  take(key: RateKey): RateDecision;
  /** Suppressed counts not yet reported in an alert, by trap (for the shutdown log). */
  pending(): Map<string, number>;
  /** Keys held (bounded by maxKeys). */
  size(): number;
}

interface Bucket {
  trapId: string;
  tokens: number;
  at: number;
  /** Start of the key's current window. */
  windowStart: number;
  suppressed: number;
}

export function createTrapRateLimiter(options: RateLimitOptions = {}): TrapRateLimiter {
  const perSecond = options.perSecond ?? 100;
  const burst = options.burst ?? perSecond * 2;
  const windowMs = options.windowMs ?? 60_000;
  const maxKeys = options.maxKeys ?? 10_000;
  const now = options.now ?? (() => performance.now());
  if (!(perSecond > 0) || !(burst >= 1) || !(windowMs > 0) || !(maxKeys >= 1))
    throw new RangeError("rate limit needs perSecond > 0, burst >= 1, windowMs > 0 and maxKeys >= 1");
  /** In least-recently-used order: a used key is moved to the end. */
  const buckets = new Map<string, Bucket>();
  /** Suppressed counts of evicted keys, by trap, reported in the trap's next alert. */
  const orphaned = new Map<string, number>();

  const evictOldest = () => {
    const oldest = buckets.keys().next();
    if (oldest.done) return;
    const bucket = buckets.get(oldest.value) as Bucket;
    buckets.delete(oldest.value);
    if (bucket.suppressed > 0)
      orphaned.set(bucket.trapId, (orphaned.get(bucket.trapId) ?? 0) + bucket.suppressed);
  };

  return {
    take(key) {
      const t = now();
      // NUL cannot occur in a path or a container id: the parts cannot run into each other.
      const id = `${key.trapId}\0${key.container}\0${key.exe}`;
      let bucket = buckets.get(id);
      let firstInWindow = false;
      if (!bucket) {
        while (buckets.size >= maxKeys) evictOldest();
        bucket = { trapId: key.trapId, tokens: burst, at: t, windowStart: t, suppressed: 0 };
        firstInWindow = true;
      } else {
        buckets.delete(id);
        bucket.tokens = Math.min(burst, bucket.tokens + ((t - bucket.at) / 1000) * perSecond);
        bucket.at = t;
        if (t - bucket.windowStart >= windowMs) {
          bucket.windowStart = t;
          firstInWindow = true;
        }
      }
      buckets.set(id, bucket);
      if (bucket.tokens < 1 && !firstInWindow) {
        bucket.suppressed++;
        return { allowed: false, suppressed: bucket.suppressed };
      }
      bucket.tokens = Math.max(0, bucket.tokens - 1);
      const fromEvicted = orphaned.get(key.trapId) ?? 0;
      orphaned.delete(key.trapId);
      const suppressed = bucket.suppressed + fromEvicted;
      bucket.suppressed = 0;
      return { allowed: true, suppressed };
    },
    pending() {
      const out = new Map<string, number>(orphaned);
      for (const b of buckets.values())
        if (b.suppressed > 0) out.set(b.trapId, (out.get(b.trapId) ?? 0) + b.suppressed);
      return out;
    },
    size: () => buckets.size,
  };
}
