/**
 * When a failed delivery is tried again. Exponential backoff with jitter, capped at
 * `maxMs` (default 15 s: once a receiver is back, its backlog flows again within about
 * that long). A Retry-After on 429/503 is honoured (up to `maxRetryAfterMs`, default
 * 5 min) and pauses the whole destination, not just the trap.
 */
import { backoffDelay } from "../../backoff.ts";

export const DEFAULT_RETRY = { baseMs: 500, maxMs: 15_000, maxRetryAfterMs: 300_000 } as const;

export interface RetrySettings {
  baseMs: number;
  maxMs: number;
  maxRetryAfterMs: number;
}

export function retrySettings(options: {
  backoffBaseMs?: number;
  backoffMaxMs?: number;
  maxRetryAfterMs?: number;
}): RetrySettings {
  return {
    baseMs: options.backoffBaseMs ?? DEFAULT_RETRY.baseMs,
    maxMs: options.backoffMaxMs ?? DEFAULT_RETRY.maxMs,
    maxRetryAfterMs: options.maxRetryAfterMs ?? DEFAULT_RETRY.maxRetryAfterMs,
  };
}

/** Delay before attempt `attempts + 1`, and whether the destination as a whole waits that long. */
export function retryDelay(
  attempts: number,
  retryAfterMs: number | undefined,
  settings: RetrySettings,
  random: () => number,
): { delayMs: number; wholeDestination: boolean } {
  if (retryAfterMs !== undefined)
    return { delayMs: Math.min(retryAfterMs, settings.maxRetryAfterMs), wholeDestination: true };
  return {
    delayMs: backoffDelay(attempts, { baseMs: settings.baseMs, maxMs: settings.maxMs }, random),
    wholeDestination: false,
  };
}
