/**
 * Exponential backoff with "equal jitter": attempt n waits between half and all of
 * min(max, base × 2^(n−1)). Half is fixed so retries never collapse to zero delay; the
 * random half spreads many agents that lost the same receiver at the same moment.
 */
export interface BackoffOptions {
  /** Delay before the first retry, before jitter; default 500 ms. */
  baseMs: number;
  /** Cap on the delay; default 60 s. */
  maxMs: number;
}

export function backoffDelay(
  attempt: number,
  options: BackoffOptions,
  random: () => number = Math.random,
): number {
  const exp = Math.min(options.maxMs, options.baseMs * 2 ** Math.max(0, Math.min(attempt - 1, 40)));
  return exp / 2 + random() * (exp / 2);
}
