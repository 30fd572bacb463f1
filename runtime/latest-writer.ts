/**
 * Background writes of a small file that only its latest content matters for (the watch table,
 * the routing snapshot): serialised, coalesced — a write asked for while one runs replaces any
 * still waiting — and a failure reported once per streak, never thrown.
 */
export interface LatestWriter<T> {
  /** Writes `value` soon; a later call before it starts replaces it. */
  write(value: T): void;
  /** Resolves when the latest value is written (or failed). */
  idle(): Promise<void>;
}

export function createLatestWriter<T>(
  write: (value: T) => Promise<void>,
  report: { failed: (error: unknown) => void; recovered?: () => void },
): LatestWriter<T> {
  let wanted: { value: T } | undefined;
  let running: Promise<void> | undefined;
  let failing = false;
  const run = async (): Promise<void> => {
    try {
      while (wanted !== undefined) {
        const next = wanted.value;
        wanted = undefined;
        try {
          await write(next);
          if (failing) report.recovered?.();
          failing = false;
        } catch (error) {
          if (!failing) report.failed(error);
          failing = true;
        }
      }
    } finally {
      // Same turn as the loop's last check: a write() cannot fall in between and be lost.
      running = undefined;
    }
  };
  return {
    write(value) {
      wanted = { value };
      running ??= run();
    },
    async idle() {
      while (running) await running;
    },
  };
}
