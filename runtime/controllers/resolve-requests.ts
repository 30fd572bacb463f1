/**
 * Re-resolve requests for HiveData whose trapped file changed (deleted, renamed, replaced, or its
 * directory's entries changed): the loader asks, the node owning the HiveData re-resolves. None is
 * dropped: a request for an object whose previous one is still in flight (or waiting to be
 * retried) is folded into one more send after it, which covers every change seen meanwhile; a send
 * that fails is retried with capped backoff. Where the owning node's discover runs in this very
 * agent, the request goes to it in memory (`local`), without a round trip through the API server.
 */
import type { HiveData } from "../../api/data.ts";
import { type BackoffOptions, backoffDelay } from "../backoff.ts";
import type { Logger } from "../log.ts";
import { objectKey } from "./ports.ts";

export interface ResolveRequestOptions {
  /** Asks the owning node through the API server (the loader annotates the HiveData). */
  send: (d: HiveData, requestId: string) => Promise<void>;
  /** Hands the request to this agent's own discover; true when it did (nothing is sent then). */
  local?: (d: HiveData) => boolean;
  /** Refusals that no retry can change (e.g. Forbidden by an older admission policy): dropped, said. */
  isPermanent?: (error: unknown) => boolean;
  log: Logger;
  backoff?: BackoffOptions;
  /** Jitter source for the backoff (tests pass a constant). */
  random?: () => number;
}

export interface ResolveRequests {
  request(d: HiveData): void;
  /** The object is gone: nothing more is sent for it. */
  forget(key: string): void;
  /** Objects with a send in flight or waiting to be retried. */
  pending(): number;
  stop(): void;
}

interface State {
  inFlight: boolean;
  /** The latest object asked for while a send was in flight or waiting: sent once after it. */
  again: HiveData | undefined;
  attempts: number;
  timer: NodeJS.Timeout | undefined;
}

export function createResolveRequests(options: ResolveRequestOptions): ResolveRequests {
  const backoff = options.backoff ?? { baseMs: 250, maxMs: 10_000 };
  const states = new Map<string, State>();
  let sequence = 0;
  let stopped = false;

  const send = (key: string, st: State, d: HiveData): void => {
    st.inFlight = true;
    // Distinct each time, even within one millisecond: the owner re-resolves on every new value.
    const requestId = `${Date.now()}-${++sequence}`;
    options.send(d, requestId).then(
      () => {
        st.inFlight = false;
        st.attempts = 0;
        next(key, st);
      },
      (error: unknown) => {
        st.inFlight = false;
        if (stopped || states.get(key) !== st) return;
        if (options.isPermanent?.(error)) {
          options.log.warn("re-resolve request refused; not retried", { name: key, error });
          next(key, st);
          return;
        }
        st.attempts += 1;
        const delayMs = backoffDelay(st.attempts, backoff, options.random);
        options.log.warn("re-resolve request failed; retried", { name: key, delayMs, error });
        st.again ??= d;
        st.timer = setTimeout(() => {
          st.timer = undefined;
          next(key, st);
        }, delayMs);
      },
    );
  };

  const next = (key: string, st: State): void => {
    if (stopped || states.get(key) !== st) return;
    const again = st.again;
    if (again === undefined) {
      states.delete(key);
      return;
    }
    st.again = undefined;
    send(key, st, again);
  };

  return {
    request(d) {
      if (stopped) return;
      if (options.local?.(d)) return;
      const key = objectKey(d);
      const st = states.get(key);
      if (st) {
        // In flight or waiting to be retried: one more send after it covers this change too.
        st.again = d;
        return;
      }
      const fresh: State = { inFlight: false, again: undefined, attempts: 0, timer: undefined };
      states.set(key, fresh);
      send(key, fresh, d);
    },
    forget(key) {
      const st = states.get(key);
      if (st?.timer !== undefined) clearTimeout(st.timer);
      states.delete(key);
    },
    pending: () => states.size,
    stop() {
      stopped = true;
      for (const st of states.values()) if (st.timer !== undefined) clearTimeout(st.timer);
      states.clear();
    },
  };
}
