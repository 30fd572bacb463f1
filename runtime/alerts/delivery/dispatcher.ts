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
import { HiveError, isHiveError } from "../../../api/errors.ts";
import type { Logger } from "../../log.ts";
import type { HiveMetrics } from "../../metrics/metrics.ts";
import { displaySafe } from "../../text.ts";
import { boundedMemo } from "../spool/bounded-memo.ts";
import type { SegmentDrop, Spool, SpoolRecord, SpoolRef } from "../spool/spool.ts";
import {
  type CallbackRequest,
  createCallbackOptions,
  type DestinationOptions,
  redact,
} from "./callback-options.ts";
import { DeliveryBacklog } from "./delivery-backlog.ts";
import type { Item, Lane } from "./delivery-queue.ts";
import { DeliveryScheduler, type Destination } from "./delivery-scheduler.ts";
import { type AuthFailureHandler, noteDelivered, noteRetryableFailure } from "./destination-health.ts";
import { formatHint } from "./format-hint.ts";
import { type PostResult, postOnce } from "./http-post.ts";
import { retryDelay, retrySettings } from "./retry-policy.ts";

export type { AlertFormat, DestinationOptions } from "./callback-options.ts";

/** How often alerts to a destination whose credentials are not read yet look again. */
const PENDING_RECHECK_MS = 1000;

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

export function createDispatcher(options: DispatcherOptions): Dispatcher {
  const { logger, metrics, spool } = options;
  const timeouts = {
    connectTimeoutMs: options.connectTimeoutMs ?? 5_000,
    responseTimeoutMs: options.responseTimeoutMs ?? 10_000,
  };
  const retry = retrySettings(options);
  const maxPendingBytes = options.maxPendingBytes ?? 16 * 1024 * 1024;
  const random = options.random ?? Math.random;
  const userAgent = options.userAgent ?? "hive-agent";
  const callbackOptions = createCallbackOptions(options.destinations ?? []);
  const parse = boundedMemo(parseCallbackUrl);

  const scheduler = new DeliveryScheduler({
    concurrency: Math.max(1, options.concurrency ?? 4),
    ca: options.ca,
    send: (dest, lane, item) => attempt(dest, lane, item),
  });
  const backlog = new DeliveryBacklog({
    logger,
    metrics,
    spool,
    maxPendingBytes,
    quotaBytes: options.destinationQuotaBytes ?? maxPendingBytes,
    destinations: scheduler.destinations,
  });

  const buildRequest = (item: Item): CallbackRequest => {
    // With a spool the body is kept in memory only while it is enqueued (so a first attempt
    // made at once needs no read-back); later attempts read it back (from the spool's memory
    // while the disk has not taken it yet, else from disk).
    const alertJson =
      item.rec.body !== "" ? item.rec.body : item.ref && spool ? spool.read(item.ref) : undefined;
    if (alertJson === undefined) {
      throw new HiveError("SpoolCorrupt", "a queued alert is missing from the spool", {
        object: item.rec.id,
      });
    }
    return callbackOptions.request(item.rec.url, alertJson, {
      alertId: item.rec.id,
      attempt: item.attempts,
      userAgent,
    });
  };

  const finishAttempt = (dest: Destination, lane: Lane) => {
    lane.busy = false;
    backlog.updateGauges();
    scheduler.makeReady(dest, lane);
    scheduler.pump(dest);
  };

  const retryLater = (dest: Destination, lane: Lane, item: Item, retryAfterMs: number | undefined) => {
    metrics.deliveryRetries.inc({ destination: dest.origin });
    const { delayMs, wholeDestination } = retryDelay(item.attempts, retryAfterMs, retry, random);
    // The receiver asked the whole destination to slow down, not just this trap.
    scheduler.backoff(dest, lane, delayMs, wholeDestination);
    backlog.updateGauges();
    scheduler.pump(dest);
    return delayMs;
  };

  /** Destinations whose credentials are not known yet, logged once each until they are. */
  const waitingLogged = new Set<string>();
  const attempt = async (dest: Destination, lane: Lane, item: Item): Promise<void> => {
    const pending = callbackOptions.pendingFor(item.rec.url);
    if (pending !== undefined) {
      // Not an attempt: the alert waits (spooled) until setDestinations brings its credentials.
      if (!waitingLogged.has(dest.origin)) {
        waitingLogged.add(dest.origin);
        logger.warn("alerts to this callback wait until its credentials can be read", {
          destination: dest.origin,
          reason: pending,
        });
      }
      dest.inFlight--;
      scheduler.backoff(dest, lane, PENDING_RECHECK_MS, false);
      return;
    }
    item.inFlight = true;
    item.attempts++;
    const label = { destination: dest.origin };
    let request: CallbackRequest;
    try {
      request = buildRequest(item);
    } catch (error) {
      item.inFlight = false;
      dest.inFlight--;
      if (!isHiveError(error, "SpoolCorrupt") && !item.done && !scheduler.isClosed) {
        // The spool's disk could not be read: the alert stays queued.
        logger.warn("a spooled alert cannot be read back now; retrying", { error, alertId: item.rec.id });
        retryLater(dest, lane, item, undefined);
        return;
      }
      // The spooled bytes are damaged: no request is made, retrying cannot help.
      logger.error("a spooled alert cannot be read back; it is dropped", { error, alertId: item.rec.id });
      if (!item.done) {
        metrics.alertsDropped.inc({ reason: "spool_corrupt" });
        backlog.complete(item);
      }
      lane.busy = false;
      backlog.updateGauges();
      scheduler.makeReady(dest, lane);
      queueMicrotask(() => scheduler.pump(dest));
      return;
    }
    metrics.deliveryAttempts.inc(label);
    const result: PostResult = await postOnce(
      parse(request.url) as URL,
      request.body,
      request.headers,
      dest.agent,
      timeouts,
    );
    item.inFlight = false;
    dest.inFlight--;
    if (result.ok) {
      // The receiver is back: the others waiting out their backoff need not wait any longer.
      if (noteDelivered(dest, logger)) queueMicrotask(() => scheduler.wake(dest));
      // Counted even when a bound dropped the alert while this request was in flight: it did arrive.
      metrics.alertsDelivered.inc(label);
      metrics.deliveryLatency.observe(label, Math.max(0, Date.now() - item.rec.createdMs) / 1000);
      backlog.complete(item);
      finishAttempt(dest, lane);
      return;
    }
    metrics.deliveryFailures.inc({ destination: dest.origin, class: result.class });
    if (!result.retryable) {
      const answer = result.answer === undefined ? undefined : displaySafe(result.answer, 512);
      const hint =
        formatHint(request.url, result.status, answer, request.format) ??
        "the receiver refuses this request (wrong URL or payload); fix it, retrying cannot help";
      const error = new HiveError("DeliveryFailed", `alert callback rejected the alert: ${result.message}`, {
        object: redact(request.url),
        hint,
        status: result.status,
        alertId: item.rec.id,
        trapId: item.rec.trapId,
      });
      logger.error(`${error.message}; the alert is dropped`, {
        error,
        format: request.format,
        ...(answer === undefined ? {} : { answer }),
        reason: "permanent_failure",
      });
      if (!item.done) {
        metrics.alertsDropped.inc({ reason: "permanent_failure" });
        backlog.complete(item);
      }
      finishAttempt(dest, lane);
      return;
    }
    if (item.done || scheduler.isClosed) {
      // Dropped by a bound while in flight, or shutting down: no retry.
      finishAttempt(dest, lane);
      return;
    }
    const delayMs = retryLater(dest, lane, item, result.retryAfterMs);
    noteRetryableFailure(dest, item, result, delayMs, logger, options.onAuthFailure);
  };

  const enqueueItem = (
    dest: Destination,
    rec: SpoolRecord,
    ref: SpoolRef | undefined,
    bytes: number,
  ): Item => {
    const item: Item = { rec, ref, bytes, attempts: 0, inFlight: false, done: false, origin: dest.origin };
    backlog.add(dest, item);
    scheduler.add(dest, item);
    return item;
  };

  const invalidUrl = (rec: SpoolRecord, ref: SpoolRef | undefined) => {
    logger.error("alert callback URL is invalid; alert not delivered", {
      error: new HiveError("DeliveryFailed", "invalid callback URL", { object: rec.url, alertId: rec.id }),
    });
    metrics.alertsDropped.inc({ reason: "permanent_failure" });
    if (ref && spool) spool.ack(ref);
  };

  /** Appends to the spool; a refusal (or an unexpected failure) is counted and the alert dropped. */
  const spoolAppend = (rec: SpoolRecord): { ref: SpoolRef; bytes: number } | undefined => {
    let result: ReturnType<Spool["append"]>;
    try {
      result = (spool as Spool).append(rec);
    } catch (error) {
      result = { refused: "spool_unwritable" };
      logger.error("alert spool failed to take an alert", { error, alertId: rec.id });
    }
    if ("ref" in result) return result;
    metrics.alertsDropped.inc({ reason: result.refused });
    logger.error(
      result.refused === "too_large"
        ? "alert larger than the spool can hold; dropped"
        : "alert spool cannot write and its memory buffer is full; alert dropped",
      { alertId: rec.id, bytes: Buffer.byteLength(rec.body) + 128, reason: result.refused },
    );
    return undefined;
  };

  // Alerts spooled before a restart go first, in their original order.
  if (spool) {
    for (const r of spool.recovered) {
      const url = parse(r.url);
      if (!url) invalidUrl({ ...r, body: "" }, r.ref);
      else
        enqueueItem(scheduler.destinationFor(url.origin, url.protocol), { ...r, body: "" }, r.ref, r.bytes);
    }
  }
  backlog.updateGauges();

  return {
    enqueue(rec) {
      if (scheduler.isClosed) {
        logger.error("alert dispatcher is closed; alert not delivered", { alertId: rec.id });
        return;
      }
      const url = parse(rec.url);
      if (!url) {
        invalidUrl(rec, undefined);
        return;
      }
      const dest = scheduler.destinationFor(url.origin, url.protocol);
      let ref: SpoolRef | undefined;
      let bytes: number;
      if (spool) {
        const spooled = spoolAppend(rec);
        if (!spooled) {
          backlog.updateGauges();
          return;
        }
        ({ ref, bytes } = spooled);
      } else {
        bytes = Buffer.byteLength(rec.body) + 128;
        backlog.makeRoom(dest, bytes);
      }
      const item = enqueueItem(dest, rec, ref, bytes);
      // In the spool now: an attempt not made during enqueueItem reads the body back from there.
      if (ref && !item.done) item.rec = { ...item.rec, body: "" };
      backlog.updateGauges();
    },
    idle: (timeoutMs) => backlog.idle(timeoutMs),
    pending: () => backlog.count,
    async close() {
      await scheduler.close();
      backlog.updateGauges();
    },
    setDestinations(list) {
      callbackOptions.set(list);
      waitingLogged.clear();
      // New credentials: what waits for a retry (or for them) is tried with them at once.
      for (const dest of scheduler.destinations.values()) scheduler.wake(dest);
    },
    spoolSegmentDropped: (drop) => backlog.segmentDropped(drop),
  };
}
