/**
 * Delivers alerts to their callbacks: at least once, in order within a trap, with bounded
 * concurrency per destination.
 *
 * - A destination is a callback URL's origin (scheme://host:port). Each has its own
 *   keep-alive connection pool of `concurrency` sockets and never has more requests in
 *   flight than that.
 * - Ordering promise: alerts of one trap are delivered in the order they were produced
 *   (across restarts too: the spool replays in order). The next alert of a trap is sent
 *   only after the previous one was acknowledged (2xx) or given up (permanent failure,
 *   dropped by a bound). Different traps proceed independently (delivery-queue.ts).
 * - Retryable failures (refused, reset, timeouts, DNS, 5xx, 408/425, 429, and 401/403/404:
 *   credentials being rotated) are retried forever with capped backoff (retry-policy.ts).
 *   When one alert of a failing destination gets through, the others waiting out a backoff
 *   are sent at once. Permanent failures (other 4xx) are logged with the status and counted
 *   as dropped (reason permanent_failure); they are not retried.
 * - Bounds: the spool's (spool.ts: per destination, then fair share) or, without a spool,
 *   `maxPendingBytes` with the same rule: a destination over `destinationQuotaBytes` loses
 *   its own oldest (destination_quota); when all together are over the bound, the
 *   destination holding the most loses its oldest (spool_full). One dead callback cannot
 *   evict the smaller backlog of another.
 * - Every request carries `Hive-Alert-Id` (the alert id, stable across retries, so a
 *   receiver can drop duplicates) and `Hive-Delivery-Attempt` (1, 2, …).
 */
import http from "node:http";
import https from "node:https";
import tls from "node:tls";
import { HiveError, isHiveError } from "../errors.ts";
import type { Logger } from "../log.ts";
import type { DropReason, HiveMetrics } from "../metrics/metrics.ts";
import {
  type CallbackRequest,
  createCallbackOptions,
  type DestinationOptions,
  redact,
} from "./callback-options.ts";
import { type Item, ItemList, type Lane, laneHead, newLane, trimLane } from "./delivery-queue.ts";
import { type PostResult, postOnce } from "./http-post.ts";
import { retryDelay, retrySettings } from "./retry-policy.ts";
import type { SegmentDrop, Spool, SpoolRecord, SpoolRef } from "./spool.ts";

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
  onAuthFailure?: (failure: { destination: string; status: number | undefined; url: string }) => void;
}

interface Destination {
  origin: string;
  agent: http.Agent;
  inFlight: number;
  notBefore: number;
  wakeTimer: NodeJS.Timeout | undefined;
  lanes: Map<string, Lane>;
  ready: Lane[];
  failing: boolean;
  authFailing: boolean;
  /** Undelivered items and their bytes (the quota). */
  items: ItemList;
  pendingCount: number;
  pendingBytes: number;
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

export function createDispatcher(options: DispatcherOptions): Dispatcher {
  const { logger, metrics, spool } = options;
  const concurrency = Math.max(1, options.concurrency ?? 4);
  const timeouts = {
    connectTimeoutMs: options.connectTimeoutMs ?? 5_000,
    responseTimeoutMs: options.responseTimeoutMs ?? 10_000,
  };
  const retry = retrySettings(options);
  const maxPendingBytes = options.maxPendingBytes ?? 16 * 1024 * 1024;
  const quotaBytes = options.destinationQuotaBytes ?? maxPendingBytes;
  const random = options.random ?? Math.random;
  const userAgent = options.userAgent ?? "hive-agent";
  const callbackOptions = createCallbackOptions(options.destinations ?? []);

  // Node's `ca` option replaces the default trust store: add the system's roots to what is given.
  const extraCa = options.ca
    ? [...tls.rootCertificates, ...(Array.isArray(options.ca) ? options.ca : [options.ca])]
    : undefined;
  const destinations = new Map<string, Destination>();
  let pendingCount = 0;
  let pendingBytes = 0;
  let closed = false;
  let waiters: (() => void)[] = [];
  const inFlightRequests = new Set<Promise<void>>();

  const updateGauges = () => {
    if (spool) {
      const s = spool.stats();
      metrics.pendingAlerts.set(s.pending);
      metrics.spoolBytes.set(s.bytes);
    } else {
      metrics.pendingAlerts.set(pendingCount);
      metrics.spoolBytes.set(pendingBytes);
    }
  };

  const destinationFor = (origin: string, protocol: string): Destination => {
    let d = destinations.get(origin);
    if (d) return d;
    const agentOptions = {
      keepAlive: true,
      maxSockets: concurrency,
      maxFreeSockets: concurrency,
      scheduling: "fifo" as const,
    };
    d = {
      origin,
      agent:
        protocol === "https:"
          ? new https.Agent({ ...agentOptions, ...(extraCa ? { ca: extraCa } : {}) })
          : new http.Agent(agentOptions),
      inFlight: 0,
      notBefore: 0,
      wakeTimer: undefined,
      lanes: new Map(),
      ready: [],
      failing: false,
      authFailing: false,
      items: new ItemList(),
      pendingCount: 0,
      pendingBytes: 0,
    };
    destinations.set(origin, d);
    return d;
  };

  const complete = (item: Item) => {
    if (item.done) return;
    item.done = true;
    // A finished item may stay referenced for a while (a lane waiting out a backoff keeps
    // its queue): release the body now so only a small shell remains.
    if (item.rec.body !== "") item.rec = { ...item.rec, body: "" };
    pendingCount--;
    pendingBytes -= item.bytes;
    const dest = destinations.get(item.origin);
    if (dest) {
      dest.pendingCount--;
      dest.pendingBytes -= item.bytes;
    }
    if (item.ref && spool) spool.ack(item.ref);
    if (pendingCount === 0) {
      const w = waiters;
      waiters = [];
      for (const resolve of w) resolve();
    }
  };

  const reportDrops = (dropped: number, reason: DropReason, destination?: string) => {
    if (dropped === 0) return;
    metrics.alertsDropped.inc({ reason }, dropped);
    const quota = reason === "destination_quota";
    logger.error(
      quota
        ? "alert callback's backlog reached its quota: its oldest undelivered alerts dropped"
        : "alert spool full: oldest undelivered alerts dropped",
      {
        error: new HiveError(
          "SpoolFull",
          quota ? "destination quota reached" : "alert spool reached its size bound",
          {
            hint: "the callbacks have been unreachable for long; raise the spool size or fix the receiver",
            dropped,
            ...(destination ? { destination } : {}),
          },
        ),
      },
    );
  };

  /** An item dropped by a bound: its spool record is gone (or given up) with it. */
  const dropItem = (keepSpoolRecord: boolean) => (item: Item) => {
    // An in-flight alert is dropped too; if that request still succeeds it is also counted
    // as delivered, since it did arrive.
    if (!keepSpoolRecord) item.ref = undefined;
    complete(item);
  };

  const makeReady = (dest: Destination, lane: Lane) => {
    if (lane.busy || lane.queued || !laneHead(lane)) return;
    lane.queued = true;
    dest.ready.push(lane);
  };

  const pump = (dest: Destination) => {
    if (closed) return;
    const now = Date.now();
    if (dest.notBefore > now) {
      if (!dest.wakeTimer && dest.ready.length > 0) {
        dest.wakeTimer = setTimeout(() => {
          dest.wakeTimer = undefined;
          pump(dest);
        }, dest.notBefore - now);
      }
      return;
    }
    while (dest.inFlight < concurrency && dest.ready.length > 0) {
      const lane = dest.ready.shift() as Lane;
      lane.queued = false;
      const item = laneHead(lane);
      if (!item || lane.busy) continue;
      lane.busy = true;
      dest.inFlight++;
      const p = attempt(dest, lane, item);
      inFlightRequests.add(p);
      void p.finally(() => inFlightRequests.delete(p));
    }
  };

  /** Lanes waiting out a backoff are sent now (the receiver answered again, or credentials changed). */
  const wakeLanes = (dest: Destination) => {
    for (const lane of dest.lanes.values()) {
      if (!lane.timer) continue;
      clearTimeout(lane.timer);
      lane.timer = undefined;
      lane.busy = false;
      makeReady(dest, lane);
    }
    pump(dest);
  };

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
    updateGauges();
    makeReady(dest, lane);
    pump(dest);
  };

  const retryLater = (dest: Destination, lane: Lane, item: Item, retryAfterMs: number | undefined) => {
    metrics.deliveryRetries.inc({ destination: dest.origin });
    const { delayMs, wholeDestination } = retryDelay(item.attempts, retryAfterMs, retry, random);
    // The receiver asked the whole destination to slow down, not just this trap.
    if (wholeDestination) dest.notBefore = Math.max(dest.notBefore, Date.now() + delayMs);
    lane.timer = setTimeout(() => {
      lane.timer = undefined;
      lane.busy = false;
      makeReady(dest, lane);
      pump(dest);
    }, delayMs);
    updateGauges();
    pump(dest);
    return delayMs;
  };

  const attempt = async (dest: Destination, lane: Lane, item: Item): Promise<void> => {
    item.inFlight = true;
    item.attempts++;
    const label = { destination: dest.origin };
    let request: CallbackRequest;
    try {
      request = buildRequest(item);
    } catch (error) {
      item.inFlight = false;
      dest.inFlight--;
      if (!isHiveError(error, "SpoolCorrupt") && !item.done && !closed) {
        // The spool's disk could not be read: the alert stays queued.
        logger.warn("a spooled alert cannot be read back now; retrying", { error, alertId: item.rec.id });
        retryLater(dest, lane, item, undefined);
        return;
      }
      // The spooled bytes are damaged: no request is made, retrying cannot help.
      logger.error("a spooled alert cannot be read back; it is dropped", { error, alertId: item.rec.id });
      if (!item.done) {
        metrics.alertsDropped.inc({ reason: "spool_corrupt" });
        complete(item);
      }
      lane.busy = false;
      updateGauges();
      makeReady(dest, lane);
      queueMicrotask(() => pump(dest));
      return;
    }
    metrics.deliveryAttempts.inc(label);
    const result: PostResult = await postOnce(
      parse(item.rec.url) as URL,
      request.body,
      request.headers,
      dest.agent,
      timeouts,
    );
    item.inFlight = false;
    dest.inFlight--;
    if (result.ok) {
      if (dest.failing || dest.authFailing) {
        logger.info("alert callback accepts alerts again", { destination: dest.origin });
        dest.failing = false;
        dest.authFailing = false;
        // The receiver is back: the others waiting out their backoff need not wait any longer.
        queueMicrotask(() => wakeLanes(dest));
      }
      // Counted even when a bound dropped the alert while this request was in flight: it did arrive.
      metrics.alertsDelivered.inc(label);
      metrics.deliveryLatency.observe(label, Math.max(0, Date.now() - item.rec.createdMs) / 1000);
      complete(item);
      finishAttempt(dest, lane);
      return;
    }
    metrics.deliveryFailures.inc({ destination: dest.origin, class: result.class });
    if (!result.retryable) {
      const error = new HiveError("DeliveryFailed", `alert callback rejected the alert: ${result.message}`, {
        object: redact(item.rec.url),
        hint: "the receiver refuses this request (wrong URL or payload); fix it, retrying cannot help",
        status: result.status,
        alertId: item.rec.id,
        trapId: item.rec.trapId,
      });
      logger.error(error.message, { error });
      if (!item.done) {
        metrics.alertsDropped.inc({ reason: "permanent_failure" });
        complete(item);
      }
      finishAttempt(dest, lane);
      return;
    }
    if (item.done || closed) {
      // Dropped by a bound while in flight, or shutting down: no retry.
      finishAttempt(dest, lane);
      return;
    }
    const delayMs = retryLater(dest, lane, item, result.retryAfterMs);
    const isAuth = result.class === "http_auth" || result.status === 404;
    if (isAuth && !dest.authFailing) {
      dest.authFailing = true;
      dest.failing = true;
      logger.error("alert callback refuses Hive's credentials; alerts are kept and retried", {
        error: new HiveError("DeliveryFailed", `alert callback answered ${result.message}`, {
          object: redact(item.rec.url),
          hint: "update the callback headers Secret (applied without a restart) or the receiver; alerts wait in the spool meanwhile",
          status: result.status,
        }),
      });
      options.onAuthFailure?.({ destination: dest.origin, status: result.status, url: redact(item.rec.url) });
    } else if (!dest.failing) {
      dest.failing = true;
      logger.warn("alert callback failing; retrying with backoff", {
        destination: dest.origin,
        class: result.class,
        status: result.status,
        message: result.message,
      });
    } else {
      logger.debug("alert delivery retry", {
        destination: dest.origin,
        alertId: item.rec.id,
        attempt: item.attempts,
        delayMs: Math.round(delayMs),
        message: result.message,
      });
    }
  };

  const parsed = new Map<string, URL | undefined>();
  const parse = (raw: string): URL | undefined => {
    if (parsed.has(raw)) return parsed.get(raw);
    let url: URL | undefined;
    try {
      url = new URL(raw);
      if (url.protocol !== "http:" && url.protocol !== "https:") url = undefined;
    } catch {
      url = undefined;
    }
    // Callback URLs come from policies: few, but bound the cache anyway.
    if (parsed.size > 10_000) parsed.clear();
    parsed.set(raw, url);
    return url;
  };

  const enqueueItem = (
    dest: Destination,
    rec: SpoolRecord,
    ref: SpoolRef | undefined,
    bytes: number,
  ): Item => {
    dest.items.compact(dest.pendingCount);
    const item: Item = { rec, ref, bytes, attempts: 0, inFlight: false, done: false, origin: dest.origin };
    dest.items.push(item);
    pendingCount++;
    pendingBytes += bytes;
    dest.pendingCount++;
    dest.pendingBytes += bytes;
    let lane = dest.lanes.get(rec.trapId);
    if (!lane) {
      lane = newLane();
      dest.lanes.set(rec.trapId, lane);
    }
    trimLane(lane);
    lane.items.push(item);
    makeReady(dest, lane);
    pump(dest);
    return item;
  };

  const invalidUrl = (rec: SpoolRecord, ref: SpoolRef | undefined) => {
    logger.error("alert callback URL is invalid; alert not delivered", {
      error: new HiveError("DeliveryFailed", "invalid callback URL", { object: rec.url, alertId: rec.id }),
    });
    metrics.alertsDropped.inc({ reason: "permanent_failure" });
    if (ref && spool) spool.ack(ref);
  };

  /**
   * Drops the destination's oldest alerts until `bytes` are freed, counted under `reason`;
   * `acknowledge`: given up in the spool too, so that its segment can be deleted.
   */
  const dropOldestOf = (
    dest: Destination,
    bytes: number,
    reason: "destination_quota" | "spool_full",
    acknowledge: boolean,
  ): number => {
    let free = bytes;
    const dropped = dest.items.dropOldest(
      () => free > 0,
      (item) => {
        free -= item.bytes;
        dropItem(acknowledge)(item);
      },
    );
    reportDrops(dropped, reason, dest.origin);
    return dropped;
  };

  /** Makes room for `bytes` more in the destination's quota by dropping its own oldest. */
  const enforceQuota = (dest: Destination, bytes: number) => {
    if (dest.pendingBytes + bytes <= quotaBytes) return;
    dropOldestOf(dest, dest.pendingBytes + bytes - quotaBytes, "destination_quota", true);
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
      else enqueueItem(destinationFor(url.origin, url.protocol), { ...r, body: "" }, r.ref, r.bytes);
    }
  }
  updateGauges();

  return {
    enqueue(rec) {
      if (closed) {
        logger.error("alert dispatcher is closed; alert not delivered", { alertId: rec.id });
        return;
      }
      const url = parse(rec.url);
      if (!url) {
        invalidUrl(rec, undefined);
        return;
      }
      const dest = destinationFor(url.origin, url.protocol);
      let ref: SpoolRef | undefined;
      let bytes: number;
      if (spool) {
        const spooled = spoolAppend(rec);
        if (!spooled) {
          updateGauges();
          return;
        }
        ({ ref, bytes } = spooled);
      } else {
        bytes = Buffer.byteLength(rec.body) + 128;
        while (pendingBytes + bytes > maxPendingBytes) {
          // The destination holding the most gives up its oldest.
          let largest: Destination | undefined;
          for (const d of destinations.values())
            if (!largest || d.pendingBytes > largest.pendingBytes) largest = d;
          if (!largest || largest.pendingCount === 0) break;
          if (dropOldestOf(largest, pendingBytes + bytes - maxPendingBytes, "spool_full", false) === 0) break;
        }
        enforceQuota(dest, bytes);
      }
      const item = enqueueItem(dest, rec, ref, bytes);
      // In the spool now: an attempt not made during enqueueItem reads the body back from there.
      if (ref && !item.done) item.rec = { ...item.rec, body: "" };
      updateGauges();
    },
    idle(timeoutMs) {
      if (pendingCount === 0) return Promise.resolve(true);
      return new Promise<boolean>((resolve) => {
        const timer = timeoutMs === undefined ? undefined : setTimeout(() => resolve(false), timeoutMs);
        waiters.push(() => {
          clearTimeout(timer);
          resolve(true);
        });
      });
    },
    pending: () => pendingCount,
    async close() {
      closed = true;
      for (const dest of destinations.values()) {
        clearTimeout(dest.wakeTimer);
        for (const lane of dest.lanes.values()) clearTimeout(lane.timer);
        dest.agent.destroy();
      }
      await Promise.allSettled([...inFlightRequests]);
      updateGauges();
    },
    setDestinations(list) {
      callbackOptions.set(list);
      // New credentials: what waits for a retry is tried with them at once.
      for (const dest of destinations.values()) if (dest.failing) wakeLanes(dest);
    },
    spoolSegmentDropped(drop) {
      // The spool drops a destination's segments oldest first: drop its items of that segment and older.
      const dest = destinations.get(drop.stream);
      const dropped =
        dest?.items.dropOldest(
          (item) => item.ref === undefined || item.ref.segment <= drop.segment,
          dropItem(false),
        ) ?? 0;
      reportDrops(dropped, drop.reason, drop.stream);
    },
  };
}
