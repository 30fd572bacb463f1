/**
 * One delivery attempt of a lane's head alert, and what its answer leads to: acknowledged,
 * given up (a permanent refusal, or spooled bytes that cannot be read back), or retried after
 * a backoff. It is the scheduler's `send`: the lane stays busy until the attempt hands it back
 * (`finish`) or a backoff timer releases it.
 */
import { HiveError, isHiveError } from "../../../api/errors.ts";
import type { Logger } from "../../log.ts";
import type { DropReason, HiveMetrics } from "../../metrics/metrics.ts";
import { displaySafe } from "../../text.ts";
import type { Spool } from "../spool/spool.ts";
import { type CallbackOptions, type CallbackRequest, redact } from "./callback-options.ts";
import type { DeliveryBacklog } from "./delivery-backlog.ts";
import type { Item, Lane } from "./delivery-queue.ts";
import type { DeliveryScheduler, Destination } from "./delivery-scheduler.ts";
import { type AuthFailureHandler, noteDelivered, noteRetryableFailure } from "./destination-health.ts";
import { formatHint } from "./format-hint.ts";
import { type PostTimeouts, postOnce } from "./http-post.ts";
import type { PostFailure } from "./post-result.ts";
import { type RetrySettings, retryDelay } from "./retry-policy.ts";

/** How often alerts to a destination whose credentials are not read yet look again. */
export const PENDING_RECHECK_MS = 1000;

/** What an attempt works with; all of it is owned by the dispatcher. */
export interface AttemptContext {
  logger: Logger;
  metrics: HiveMetrics;
  spool: Spool | undefined;
  scheduler: DeliveryScheduler;
  backlog: DeliveryBacklog;
  callbackOptions: CallbackOptions;
  parse: (url: string) => URL | undefined;
  timeouts: PostTimeouts;
  retry: RetrySettings;
  random: () => number;
  userAgent: string;
  onAuthFailure: AuthFailureHandler | undefined;
}

/**
 * The alert's JSON. With a spool the body is kept in memory only while it is enqueued (so a
 * first attempt made at once needs no read-back); later attempts read it back (from the
 * spool's memory while the disk has not taken it yet, else from disk). Throws SpoolCorrupt
 * when it is gone, and whatever the spool throws when its disk cannot be read.
 */
export function alertJsonOf(item: Item, spool: Pick<Spool, "read"> | undefined): string {
  const alertJson =
    item.rec.body !== "" ? item.rec.body : item.ref && spool ? spool.read(item.ref) : undefined;
  if (alertJson === undefined) {
    throw new HiveError("SpoolCorrupt", "a queued alert is missing from the spool", {
      object: item.rec.id,
    });
  }
  return alertJson;
}

/**
 * Whether an alert that could not be read back stays queued: only when the disk failed (the
 * bytes are not known to be damaged) and nothing else ended it meanwhile.
 */
export function isReadRetryable(error: unknown, item: Pick<Item, "done">, closed: boolean): boolean {
  return !isHiveError(error, "SpoolCorrupt") && !item.done && !closed;
}

/** How a permanent refusal is logged: the error with its fix, and the start of the receiver's answer. */
export function rejection(
  request: Pick<CallbackRequest, "url" | "format">,
  result: PostFailure,
  rec: Pick<Item["rec"], "id" | "trapId">,
): { error: HiveError; answer: string | undefined } {
  const answer = result.answer === undefined ? undefined : displaySafe(result.answer, 512);
  const hint =
    formatHint(request.url, result.status, answer, request.format) ??
    "the receiver refuses this request (wrong URL or payload); fix it, retrying cannot help";
  const error = new HiveError("DeliveryFailed", `alert callback rejected the alert: ${result.message}`, {
    object: redact(request.url),
    hint,
    status: result.status,
    alertId: rec.id,
    trapId: rec.trapId,
  });
  return { error, answer };
}

export class DeliveryAttempts {
  private readonly ctx: AttemptContext;
  /** Destinations whose credentials are not known yet, logged once each until they are. */
  private readonly waitingLogged = new Set<string>();

  constructor(ctx: AttemptContext) {
    this.ctx = ctx;
  }

  /** New credentials were set: a destination still waiting for them is logged again. */
  credentialsChanged(): void {
    this.waitingLogged.clear();
  }

  /** One attempt of the lane's head `item` (the scheduler counted it in `dest.inFlight`). */
  async run(dest: Destination, lane: Lane, item: Item): Promise<void> {
    const { metrics, scheduler } = this.ctx;
    const pending = this.ctx.callbackOptions.pendingFor(item.rec.url);
    if (pending !== undefined) return this.waitForCredentials(dest, lane, pending);
    item.inFlight = true;
    item.attempts++;
    const request = this.requestFor(dest, lane, item);
    if (request === undefined) return;
    metrics.deliveryAttempts.inc({ destination: dest.origin });
    const url = this.ctx.parse(request.url) as URL;
    const result = await postOnce(url, request.body, request.headers, dest.agent, this.ctx.timeouts);
    item.inFlight = false;
    dest.inFlight--;
    if (result.ok) return this.delivered(dest, lane, item);
    metrics.deliveryFailures.inc({ destination: dest.origin, class: result.class });
    if (!result.retryable) return this.rejected(dest, lane, item, request, result);
    // Dropped by a bound while in flight, or shutting down: no retry.
    if (item.done || scheduler.isClosed) return this.finish(dest, lane);
    const delayMs = this.retryLater(dest, lane, item, result.retryAfterMs);
    noteRetryableFailure(dest, item, result, delayMs, this.ctx.logger, this.ctx.onAuthFailure);
  }

  /** Not an attempt: the alert waits (spooled) until setDestinations brings its credentials. */
  private waitForCredentials(dest: Destination, lane: Lane, reason: string): void {
    if (!this.waitingLogged.has(dest.origin)) {
      this.waitingLogged.add(dest.origin);
      this.ctx.logger.warn("alerts to this callback wait until its credentials can be read", {
        destination: dest.origin,
        reason,
      });
    }
    dest.inFlight--;
    this.ctx.scheduler.backoff(dest, lane, PENDING_RECHECK_MS, false);
  }

  /** The request for this attempt; undefined when the alert cannot be read back (handled here). */
  private requestFor(dest: Destination, lane: Lane, item: Item): CallbackRequest | undefined {
    try {
      return this.ctx.callbackOptions.request(item.rec.url, alertJsonOf(item, this.ctx.spool), {
        alertId: item.rec.id,
        attempt: item.attempts,
        userAgent: this.ctx.userAgent,
      });
    } catch (error) {
      this.unreadable(dest, lane, item, error);
      return undefined;
    }
  }

  private unreadable(dest: Destination, lane: Lane, item: Item, error: unknown): void {
    const { logger } = this.ctx;
    item.inFlight = false;
    dest.inFlight--;
    if (isReadRetryable(error, item, this.ctx.scheduler.isClosed)) {
      // The spool's disk could not be read: the alert stays queued.
      logger.warn("a spooled alert cannot be read back now; retrying", { error, alertId: item.rec.id });
      this.retryLater(dest, lane, item, undefined);
      return;
    }
    // The spooled bytes are damaged: no request is made, retrying cannot help.
    logger.error("a spooled alert cannot be read back; it is dropped", { error, alertId: item.rec.id });
    this.giveUp(item, "spool_corrupt");
    // Still inside the scheduler's pump that started this attempt: pump again after it.
    this.finish(dest, lane, true);
  }

  private delivered(dest: Destination, lane: Lane, item: Item): void {
    const { logger, metrics, scheduler } = this.ctx;
    const label = { destination: dest.origin };
    // The receiver is back: the others waiting out their backoff need not wait any longer.
    if (noteDelivered(dest, logger)) queueMicrotask(() => scheduler.wake(dest));
    // Counted even when a bound dropped the alert while this request was in flight: it did arrive.
    metrics.alertsDelivered.inc(label);
    metrics.deliveryLatency.observe(label, Math.max(0, Date.now() - item.rec.createdMs) / 1000);
    this.ctx.backlog.complete(item);
    this.finish(dest, lane);
  }

  private rejected(
    dest: Destination,
    lane: Lane,
    item: Item,
    request: CallbackRequest,
    result: PostFailure,
  ): void {
    const { error, answer } = rejection(request, result, item.rec);
    this.ctx.logger.error(`${error.message}; the alert is dropped`, {
      error,
      format: request.format,
      ...(answer === undefined ? {} : { answer }),
      reason: "permanent_failure",
    });
    this.giveUp(item, "permanent_failure");
    this.finish(dest, lane);
  }

  /** Counted as dropped and acknowledged, unless a bound dropped it already. */
  private giveUp(item: Item, reason: DropReason): void {
    if (item.done) return;
    this.ctx.metrics.alertsDropped.inc({ reason });
    this.ctx.backlog.complete(item);
  }

  /** The lane is free for its next alert. */
  private finish(dest: Destination, lane: Lane, deferPump = false): void {
    const { scheduler } = this.ctx;
    lane.busy = false;
    this.ctx.backlog.updateGauges();
    scheduler.makeReady(dest, lane);
    if (deferPump) queueMicrotask(() => scheduler.pump(dest));
    else scheduler.pump(dest);
  }

  /** The lane sends `item` again after a backoff; returns the delay. */
  private retryLater(dest: Destination, lane: Lane, item: Item, retryAfterMs: number | undefined): number {
    const { scheduler } = this.ctx;
    this.ctx.metrics.deliveryRetries.inc({ destination: dest.origin });
    const { delayMs, wholeDestination } = retryDelay(
      item.attempts,
      retryAfterMs,
      this.ctx.retry,
      this.ctx.random,
    );
    // The receiver asked the whole destination to slow down, not just this trap.
    scheduler.backoff(dest, lane, delayMs, wholeDestination);
    this.ctx.backlog.updateGauges();
    scheduler.pump(dest);
    return delayMs;
  }
}
