/**
 * Per-object retries for a controller's writes: one object whose request keeps failing (a 500,
 * a 429, a webhook that is down) is retried on its own backoff while the pass goes on with every
 * other object, so no pass is hostage to one object.
 */
import { type BackoffOptions, backoffDelay } from "../backoff.ts";

export interface ObjectRetries {
  /** False while `key` waits out the backoff of its last failure. */
  due(key: string, now?: number): boolean;
  /** Records a failure of `key`; returns the delay before it is due again (ms). */
  failed(key: string, now?: number): number;
  /** The object's write succeeded, or the object is gone: its backoff is forgotten. */
  forget(key: string): void;
  /** Milliseconds until the earliest waiting object is due (Infinity when none waits). */
  nextDueInMs(now?: number): number;
}

export function createObjectRetries(options: BackoffOptions = { baseMs: 500, maxMs: 60_000 }): ObjectRetries {
  const state = new Map<string, { attempts: number; dueAt: number }>();
  return {
    due: (key, now = Date.now()) => (state.get(key)?.dueAt ?? 0) <= now,
    failed(key, now = Date.now()) {
      const attempts = (state.get(key)?.attempts ?? 0) + 1;
      const delay = backoffDelay(attempts, options);
      state.set(key, { attempts, dueAt: now + delay });
      return delay;
    },
    forget: (key) => void state.delete(key),
    nextDueInMs(now = Date.now()) {
      let next = Number.POSITIVE_INFINITY;
      for (const { dueAt } of state.values()) next = Math.min(next, Math.max(0, dueAt - now));
      return next;
    },
  };
}
