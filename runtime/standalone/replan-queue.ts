/**
 * When standalone mode re-plans: at once, one at a time. Requests that arrive while one runs are
 * coalesced into the next one, never dropped (a burst of events is one re-plan); a failed one is
 * tried again after a doubling delay, its cause said once while it keeps failing.
 */
import type { Logger } from "../log.ts";

/** One re-plan to run: `full` re-plans whatever the containers; otherwise only if they changed. */
export interface Replan {
  full: boolean;
  /** The reasons of the requests it stands for, bounded for the log (joinReasons). */
  reason: string;
}

export interface ReplanQueueOptions {
  run(replan: Replan): Promise<void>;
  logger: Logger;
  /** Delay before a failed re-plan is tried again, doubling up to MAX_RETRY_MS. */
  retryMs: number;
}

export interface ReplanQueue {
  /** Resolves when the re-plan this request joined has run (or failed, said in the log). */
  schedule(reason: string, full: boolean): Promise<void>;
  /** Runs nothing more, retries nothing more; resolves when the running re-plan is done. */
  stop(): Promise<void>;
}

/** The longest delay between tries of a re-plan that keeps failing (ms). */
export const MAX_RETRY_MS = 30_000;

/** Re-plans failed in a row: the last cause (said once) and how many (for the delay). */
export interface FailureStreak {
  readonly message?: string;
  readonly count: number;
}

/** A re-plan failed: the log level it is said at, when it is tried again, and the streak after it. */
export function failedAgain(
  streak: FailureStreak,
  message: string,
  retryMs: number,
): { level: "error" | "debug"; delayMs: number; streak: FailureStreak } {
  const count = streak.count + 1;
  return {
    // Said once per cause: a runtime that keeps failing is re-listed every event or period.
    level: streak.message === message ? "debug" : "error",
    delayMs: Math.min(MAX_RETRY_MS, retryMs * 2 ** (count - 1)),
    streak: { message, count },
  };
}

/** Reasons of coalesced requests, bounded for the log. */
export function joinReasons(reasons: readonly string[]): string {
  const [first, ...rest] = [...new Set(reasons)];
  return rest.length === 0 ? (first ?? "") : `${first} (+${rest.length} more)`;
}

/** The request not started yet: later requests join it. */
interface Queued {
  full: boolean;
  reasons: string[];
  done: Promise<void>;
}

export function createReplanQueue(options: ReplanQueueOptions): ReplanQueue {
  const { logger } = options;
  let running: Promise<void> = Promise.resolve();
  let queued: Queued | undefined;
  let streak: FailureStreak = { count: 0 };
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;

  const succeeded = () => {
    if (streak.message !== undefined) logger.info("re-plans work again", { after: streak.message });
    streak = { count: 0 };
  };
  const failed = (job: Queued, error: unknown) => {
    const message = error instanceof Error ? error.message : String(error);
    const next = failedAgain(streak, message, options.retryMs);
    streak = next.streak;
    logger[next.level]("re-plan failed; the previous watches stay", {
      reason: joinReasons(job.reasons),
      retryInMs: next.delayMs,
      error,
    });
    // A file that changed must be followed even if the runtime failed this once.
    if (!stopped && timer === undefined)
      timer = setTimeout(() => {
        timer = undefined;
        void schedule(joinReasons(job.reasons), job.full);
      }, next.delayMs);
  };
  const schedule = (reason: string, full: boolean): Promise<void> => {
    if (queued) {
      queued.full ||= full;
      queued.reasons.push(reason);
      return queued.done;
    }
    const job: Queued = { full, reasons: [reason], done: Promise.resolve() };
    queued = job;
    job.done = running = running
      .then(async () => {
        queued = undefined;
        if (stopped) return;
        await options.run({ full: job.full, reason: joinReasons(job.reasons) });
      })
      .then(succeeded, (error: unknown) => failed(job, error));
    return job.done;
  };
  return {
    schedule,
    stop() {
      stopped = true;
      if (timer !== undefined) clearTimeout(timer);
      return running;
    },
  };
}
