/**
 * Delivers alerts to their callbacks: at least once, in order within a trap, with bounded
 * concurrency per destination.
 *
 * - A destination is a callback URL's origin (scheme://host:port). Each has its own
 *   keep-alive connection pool of `concurrency` sockets and never has more requests in
 *   flight than that (delivery-scheduler.ts).
 * - Ordering promise: alerts of one trap are delivered in the order they were produced
 *   (across restarts too: the spool replays in order). The next alert of a trap is sent
 *   only after the previous one was acknowledged (2xx) or given up (permanent failure,
 *   dropped by a bound). Different traps proceed independently (delivery-queue.ts).
 * - Retryable failures (refused, reset, timeouts, DNS, 5xx, 408/425, 429, and 401/403/404:
 *   credentials being rotated) are retried forever with capped backoff (retry-policy.ts).
 *   When one alert of a failing destination gets through, the others waiting out a backoff
 *   are sent at once; a failing destination is logged once per episode
 *   (destination-health.ts). Permanent failures (other 4xx) are logged with the status and the
 *   start of the receiver's answer, with a hint to set `callback.format` when the answer says
 *   the body was not understood (format-hint.ts), and counted as dropped (reason
 *   permanent_failure); they are not retried.
 * - Bounds: the spool's or, without a spool, `maxPendingBytes` (delivery-backlog.ts).
 * - Every request carries `Hive-Alert-Id` (the alert id, stable across retries, so a
 *   receiver can drop duplicates) and `Hive-Delivery-Attempt` (1, 2, …).
 */
import type { Logger } from "../../log.ts";
import type { HiveMetrics } from "../../metrics/metrics.ts";
import { boundedMemo } from "../spool/bounded-memo.ts";
import type { SegmentDrop, Spool, SpoolRecord } from "../spool/spool.ts";
import { createCallbackOptions, type DestinationOptions } from "./callback-options.ts";
import { DeliveryAttempts } from "./delivery-attempt.ts";
import { DeliveryBacklog } from "./delivery-backlog.ts";
import { enqueueAlert, type IntakeContext, requeueRecovered } from "./delivery-intake.ts";
import { DeliveryScheduler } from "./delivery-scheduler.ts";
import type { AuthFailureHandler } from "./destination-health.ts";
import { retrySettings } from "./retry-policy.ts";

export type { AlertFormat, DestinationOptions } from "./callback-options.ts";

export interface DispatcherOptions {
  logger: Logger;
  metrics: HiveMetrics;
  /** Durable spool; without one, undelivered alerts live in memory (bounded by maxPendingBytes). */
  spool?: Spool;
  /** Concurrent requests (and pooled sockets) per destination; default 4. */
  concurrency?: number;
  connectTimeoutMs?: number;
  responseTimeoutMs?: number;
  backoffBaseMs?: number;
  /** Longest wait between attempts of one alert; default 15 s. */
  backoffMaxMs?: number;
  /** Longest Retry-After honoured; longer ones are cut to this. Default 5 min. */
  maxRetryAfterMs?: number;
  /** Memory bound without a spool (oldest dropped and counted beyond it); default 16 MiB. */
  maxPendingBytes?: number;
  /** Without a spool: undelivered bytes one destination may hold; default maxPendingBytes (the spool has its own). */
  destinationQuotaBytes?: number;
  destinations?: DestinationOptions[];
  userAgent?: string;
  /** Extra CA certificates (PEM) trusted for https callbacks, besides the system's; e.g. a private CA. */
  ca?: string | Buffer | (string | Buffer)[];
  /** Jitter source (tests); default Math.random. */
  random?: () => number;
  /** A destination started refusing Hive's credentials (401/403/404); called once per such episode. */
  onAuthFailure?: AuthFailureHandler;
}

export interface Dispatcher {
  /** Queues an alert for its callback; spooled first when a spool is configured. Never throws. */
  enqueue(record: SpoolRecord): void;
  /** Resolves when no alert is waiting (delivered or given up), or after timeoutMs (false). */
  idle(timeoutMs?: number): Promise<boolean>;
  pending(): number;
  /** Replaces the per-prefix options (e.g. after a Secret rotation); alerts waiting out a backoff are retried now. */
  setDestinations(destinations: readonly DestinationOptions[]): void;
  /** The spool dropped a segment of a destination to stay in a bound: count and forget its alerts (and older ones). */
  spoolSegmentDropped(drop: SegmentDrop): void;
  /** Stops sending; what is not delivered stays in the spool for the next start. */
  close(): Promise<void>;
}

/** A callback URL Hive can post to; undefined for anything else. */
function parseCallbackUrl(raw: string): URL | undefined {
  try {
    const url = new URL(raw);
    return url.protocol === "http:" || url.protocol === "https:" ? url : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Composes the delivery: the scheduler picks what is sent next, the backlog counts and bounds
 * what waits, an attempt (delivery-attempt.ts) sends one alert and handles its answer, and
 * intake (delivery-intake.ts) takes new and recovered alerts in.
 */
export function createDispatcher(options: DispatcherOptions): Dispatcher {
  const { logger, metrics, spool } = options;
  const maxPendingBytes = options.maxPendingBytes ?? 16 * 1024 * 1024;
  const callbackOptions = createCallbackOptions(options.destinations ?? []);
  const parse = boundedMemo(parseCallbackUrl);

  const scheduler = new DeliveryScheduler({
    concurrency: Math.max(1, options.concurrency ?? 4),
    ca: options.ca,
    send: (dest, lane, item): Promise<void> => attempts.run(dest, lane, item),
  });
  const backlog = new DeliveryBacklog({
    logger,
    metrics,
    spool,
    maxPendingBytes,
    quotaBytes: options.destinationQuotaBytes ?? maxPendingBytes,
    destinations: scheduler.destinations,
  });
  const attempts = new DeliveryAttempts({
    logger,
    metrics,
    spool,
    scheduler,
    backlog,
    callbackOptions,
    parse,
    timeouts: {
      connectTimeoutMs: options.connectTimeoutMs ?? 5_000,
      responseTimeoutMs: options.responseTimeoutMs ?? 10_000,
    },
    retry: retrySettings(options),
    random: options.random ?? Math.random,
    userAgent: options.userAgent ?? "hive-agent",
    onAuthFailure: options.onAuthFailure,
  });
  const intake: IntakeContext = { logger, metrics, spool, scheduler, backlog, parse };

  // Alerts spooled before a restart go first, in their original order.
  if (spool) requeueRecovered(intake, spool.recovered);
  backlog.updateGauges();

  return {
    enqueue: (rec) => enqueueAlert(intake, rec),
    idle: (timeoutMs) => backlog.idle(timeoutMs),
    pending: () => backlog.count,
    async close() {
      await scheduler.close();
      backlog.updateGauges();
    },
    setDestinations(list) {
      callbackOptions.set(list);
      attempts.credentialsChanged();
      // New credentials: what waits for a retry (or for them) is tried with them at once.
      for (const dest of scheduler.destinations.values()) scheduler.wake(dest);
    },
    spoolSegmentDropped: (drop) => backlog.segmentDropped(drop),
  };
}
