/**
 * Runs a reconcile function at most once at a time, coalescing triggers that arrive while
 * it runs into one more pass, and a retry timer that is armed only when asked (backoff
 * after transient failures; never a periodic poll).
 */
export interface SerialRunner {
  /** Schedules a pass (after `debounceMs`, coalescing bursts of events). */
  trigger(): void;
  /** Schedules a pass `delayMs` from now unless an earlier retry is already due. */
  retryIn(delayMs: number): void;
  /** Resolves when no pass is running or triggered (an armed retry does not count). */
  idle(): Promise<void>;
  stop(): void;
}

export function createSerialRunner(
  run: () => Promise<void>,
  options: {
    debounceMs?: number;
    onError?: (e: unknown) => void;
    /** Seconds each pass took, failed ones included (the reconcile-latency metric). */
    onPass?: (seconds: number) => void;
  } = {},
): SerialRunner {
  const debounceMs = options.debounceMs ?? 10;
  let running = false;
  let again = false;
  let stopped = false;
  let debounce: NodeJS.Timeout | undefined;
  let retry: NodeJS.Timeout | undefined;
  let retryAt = Number.POSITIVE_INFINITY;
  let waiters: (() => void)[] = [];

  const settle = () => {
    if (running || again || debounce !== undefined) return;
    const w = waiters;
    waiters = [];
    for (const f of w) f();
  };
  const start = async () => {
    if (stopped) return;
    if (running) {
      again = true;
      return;
    }
    running = true;
    try {
      do {
        again = false;
        const started = performance.now();
        try {
          await run();
        } catch (error) {
          options.onError?.(error);
        }
        options.onPass?.((performance.now() - started) / 1000);
      } while (again && !stopped);
    } finally {
      running = false;
      settle();
    }
  };
  return {
    trigger() {
      if (stopped || debounce !== undefined) return;
      debounce = setTimeout(() => {
        debounce = undefined;
        void start();
      }, debounceMs);
    },
    retryIn(delayMs) {
      if (stopped) return;
      const at = Date.now() + delayMs;
      if (retry !== undefined && retryAt <= at) return;
      if (retry !== undefined) clearTimeout(retry);
      retryAt = at;
      retry = setTimeout(() => {
        retry = undefined;
        retryAt = Number.POSITIVE_INFINITY;
        void start();
      }, delayMs);
    },
    idle: () =>
      new Promise<void>((resolve) => {
        waiters.push(resolve);
        settle();
      }),
    stop() {
      stopped = true;
      for (const t of [debounce, retry]) if (t !== undefined) clearTimeout(t);
      debounce = undefined;
      retry = undefined;
      again = false;
      settle();
    },
  };
}
