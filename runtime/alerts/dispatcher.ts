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
 *   dropped by the spool bound). Different traps proceed independently, so one slow trap
 *   does not hold up others beyond sharing the destination's sockets.
 * - Retryable failures (refused, reset, timeouts, DNS, 5xx, 408/425, 429) are retried
 *   forever with exponential backoff and jitter; a Retry-After on 429/503 pauses the whole
 *   destination for that long (capped). What bounds a long outage is the spool: when full,
 *   the oldest alerts are dropped and counted. Permanent failures (other 4xx) are logged
 *   with the status and counted as dropped (reason permanent_failure); they are not retried.
 * - Every request carries `Hive-Alert-Id` (the alert id, stable across retries, so a
 *   receiver can drop duplicates) and `Hive-Delivery-Attempt` (1, 2, …).
 */
import http from "node:http";
import https from "node:https";
import tls from "node:tls";
import { backoffDelay } from "../backoff.ts";
import { HiveError } from "../errors.ts";
import type { Logger } from "../log.ts";
import type { HiveMetrics } from "../metrics/metrics.ts";
import { CLOUDEVENTS_CONTENT_TYPE, cloudEventBody } from "./cloudevents.ts";
import { type PostResult, postOnce } from "./http-post.ts";
import { SIGNATURE_HEADER, signBody } from "./signature.ts";
import type { Spool, SpoolRecord, SpoolRef } from "./spool.ts";

export type AlertFormat = "json" | "cloudevents";

/**
 * Options for the callbacks under one URL prefix. Secrets (extra headers, HMAC keys) are
 * only ever sent to URLs under the prefix they are configured for, so a policy author who
 * points a trap at their own server never receives the monitor's token.
 */
export interface DestinationOptions {
  /** e.g. "https://siem.example.com/hooks/"; matches that URL and URLs below it. */
  urlPrefix: string;
  /** Extra request headers (e.g. Authorization), resolved from a Kubernetes Secret. */
  headers?: Record<string, string>;
  /** HMAC-SHA256 keys; several during a rotation (one `v1=` each in Hive-Signature). */
  hmacSecrets?: (string | Buffer)[];
  /** Body format; default "json" (the alert itself). */
  format?: AlertFormat;
}

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
  backoffMaxMs?: number;
  /** Longest Retry-After honoured; longer ones are cut to this. Default 5 min. */
  maxRetryAfterMs?: number;
  /** Memory bound without a spool (oldest dropped and counted beyond it); default 16 MiB. */
  maxPendingBytes?: number;
  destinations?: DestinationOptions[];
  userAgent?: string;
  /** Extra CA certificates (PEM) trusted for https callbacks, besides the system's; e.g. a private CA. */
  ca?: string | Buffer | (string | Buffer)[];
  /** Jitter source (tests); default Math.random. */
  random?: () => number;
}

interface Item {
  rec: SpoolRecord;
  ref: SpoolRef | undefined;
  bytes: number;
  attempts: number;
  inFlight: boolean;
  done: boolean;
}

interface Lane {
  items: Item[];
  head: number;
  busy: boolean;
  queued: boolean;
  timer: NodeJS.Timeout | undefined;
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
}

interface ResolvedOptions {
  headers: Record<string, string>;
  secrets: (string | Buffer)[];
  format: AlertFormat;
}

export interface Dispatcher {
  /** Queues an alert for its callback; spooled first when a spool is configured. */
  enqueue(record: SpoolRecord): void;
  /** Resolves when no alert is waiting (delivered or given up), or after timeoutMs (false). */
  idle(timeoutMs?: number): Promise<boolean>;
  pending(): number;
  /** Replaces the per-prefix options (e.g. after a Secret rotation); applies from the next attempt. */
  setDestinations(destinations: readonly DestinationOptions[]): void;
  /** The spool dropped `segment` (and everything older) to stay in its bound: count and forget those alerts. */
  spoolSegmentDropped(segment: number): void;
  /** Stops sending; what is not delivered stays in the spool for the next start. */
  close(): Promise<void>;
}

const RESERVED_HEADERS = new Set([
  "content-type",
  "content-length",
  "host",
  "connection",
  "transfer-encoding",
]);

function urlUnder(url: string, prefix: string): boolean {
  if (!url.startsWith(prefix)) return false;
  if (url.length === prefix.length || prefix.endsWith("/")) return true;
  const next = url[prefix.length];
  return next === "/" || next === "?" || next === "#";
}

/** URL for logs: origin and path, never the query (it may carry a token). */
function redact(url: string): string {
  try {
    const u = new URL(url);
    return `${u.origin}${u.pathname}`;
  } catch {
    return "invalid URL";
  }
}

export function createDispatcher(options: DispatcherOptions): Dispatcher {
  const { logger, metrics, spool } = options;
  const concurrency = Math.max(1, options.concurrency ?? 4);
  const timeouts = {
    connectTimeoutMs: options.connectTimeoutMs ?? 5_000,
    responseTimeoutMs: options.responseTimeoutMs ?? 10_000,
  };
  const backoff = { baseMs: options.backoffBaseMs ?? 500, maxMs: options.backoffMaxMs ?? 60_000 };
  const maxRetryAfterMs = options.maxRetryAfterMs ?? 300_000;
  const maxPendingBytes = options.maxPendingBytes ?? 16 * 1024 * 1024;
  const random = options.random ?? Math.random;
  const userAgent = options.userAgent ?? "hive-agent";
  const byLongestPrefix = (list: readonly DestinationOptions[]) =>
    [...list].sort((a, b) => b.urlPrefix.length - a.urlPrefix.length);
  let prefixes = byLongestPrefix(options.destinations ?? []);

  // Node's `ca` option replaces the default trust store: add the system's roots to what is given.
  const extraCa = options.ca
    ? [...tls.rootCertificates, ...(Array.isArray(options.ca) ? options.ca : [options.ca])]
    : undefined;
  const destinations = new Map<string, Destination>();
  const resolved = new Map<string, ResolvedOptions>();
  /** Every queued item, oldest first, for drop-oldest; `doneInAll` counts finished ones at or after allHead. */
  let all: Item[] = [];
  let allHead = 0;
  let doneInAll = 0;
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

  const optionsFor = (url: string): ResolvedOptions => {
    let r = resolved.get(url);
    if (r) return r;
    const match = prefixes.find((p) => urlUnder(url, p.urlPrefix));
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(match?.headers ?? {})) {
      const key = k.toLowerCase();
      if (RESERVED_HEADERS.has(key) || key.startsWith("hive-")) continue;
      headers[key] = v;
    }
    r = { headers, secrets: match?.hmacSecrets ?? [], format: match?.format ?? "json" };
    resolved.set(url, r);
    return r;
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
    doneInAll++;
    pendingCount--;
    pendingBytes -= item.bytes;
    if (item.ref && spool) spool.ack(item.ref);
    if (pendingCount === 0) {
      const w = waiters;
      waiters = [];
      for (const resolve of w) resolve();
    }
  };

  /** Forgets completed items in `all` once they are the majority (called between iterations only). */
  const compact = () => {
    const finished = allHead + doneInAll;
    if (finished > 4096 && finished * 2 > all.length) {
      all = all.slice(allHead).filter((i) => !i.done);
      allHead = 0;
      doneInAll = 0;
    }
  };

  /** Drops undelivered items from the oldest, while `more()` says so. */
  const dropOldest = (more: (item: Item) => boolean, reason: "spool_full") => {
    let dropped = 0;
    for (let i = allHead; i < all.length; i++) {
      const item = all[i] as Item;
      if (!more(item)) break;
      // An in-flight alert is dropped too (its durable record is gone); if that request
      // still succeeds it is also counted as delivered, since it did arrive.
      if (item.done) continue;
      item.ref = undefined; // its spool record is gone (or never existed)
      complete(item);
      dropped++;
    }
    while (allHead < all.length && (all[allHead] as Item).done) {
      allHead++;
      doneInAll--;
    }
    if (dropped > 0) {
      metrics.alertsDropped.inc({ reason }, dropped);
      logger.error("alert spool full: oldest undelivered alerts dropped", {
        error: new HiveError("SpoolFull", "alert spool reached its size bound", {
          hint: "the callbacks have been unreachable for long; raise the spool size or fix the receiver",
          dropped,
        }),
      });
    }
  };

  const laneHead = (lane: Lane): Item | undefined => {
    while (lane.head < lane.items.length) {
      const item = lane.items[lane.head] as Item;
      if (!item.done) return item;
      lane.items[lane.head] = undefined as unknown as Item; // release for GC
      lane.head++;
    }
    if (lane.head > 0) {
      lane.items = [];
      lane.head = 0;
    }
    return undefined;
  };
  /** A lane that never empties would keep its consumed slots forever: cut them off now and then. */
  const trimLane = (lane: Lane) => {
    if (lane.head > 1024 && lane.head * 2 > lane.items.length) {
      lane.items = lane.items.slice(lane.head);
      lane.head = 0;
    }
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

  const buildRequest = (item: Item): { body: Buffer; headers: Record<string, string> } => {
    const opts = optionsFor(item.rec.url);
    const cloud = opts.format === "cloudevents";
    // With a spool the body is kept in memory only while it is enqueued (so a first attempt
    // made at once needs no read-back); later attempts read it back from disk.
    const alertJson =
      item.rec.body !== "" ? item.rec.body : item.ref && spool ? spool.read(item.ref) : undefined;
    if (alertJson === undefined) {
      throw new HiveError("SpoolCorrupt", "a queued alert is missing from the spool", {
        object: item.rec.id,
      });
    }
    const body = Buffer.from(cloud ? cloudEventBody(alertJson) : alertJson, "utf8");
    const headers: Record<string, string> = {
      ...opts.headers,
      "content-type": cloud ? CLOUDEVENTS_CONTENT_TYPE : "application/json",
      "user-agent": userAgent,
      "hive-alert-id": item.rec.id,
      "hive-delivery-attempt": String(item.attempts),
    };
    if (opts.secrets.length > 0)
      headers[SIGNATURE_HEADER.toLowerCase()] = signBody(opts.secrets, body, Date.now() / 1000);
    return { body, headers };
  };

  const attempt = async (dest: Destination, lane: Lane, item: Item): Promise<void> => {
    item.inFlight = true;
    item.attempts++;
    const label = { destination: dest.origin };
    let request: { body: Buffer; headers: Record<string, string> };
    try {
      request = buildRequest(item);
    } catch (error) {
      // The spooled bytes are damaged: no request is made, retrying cannot help.
      logger.error("a spooled alert cannot be read back; it is dropped", { error, alertId: item.rec.id });
      item.inFlight = false;
      dest.inFlight--;
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
      if (dest.failing) {
        dest.failing = false;
        logger.info("alert callback reachable again", { destination: dest.origin });
      }
      // Counted even when the spool bound dropped the alert while this request was in flight: it did arrive.
      metrics.alertsDelivered.inc(label);
      metrics.deliveryLatency.observe(label, Math.max(0, Date.now() - item.rec.createdMs) / 1000);
      complete(item);
      lane.busy = false;
    } else {
      metrics.deliveryFailures.inc({ destination: dest.origin, class: result.class });
      if (!result.retryable) {
        const error = new HiveError(
          "DeliveryFailed",
          `alert callback rejected the alert: ${result.message}`,
          {
            object: redact(item.rec.url),
            hint: "the receiver refuses this request (wrong URL, auth or payload); fix it, retrying cannot help",
            status: result.status,
            alertId: item.rec.id,
            trapId: item.rec.trapId,
          },
        );
        logger.error(error.message, { error });
        if (!item.done) {
          metrics.alertsDropped.inc({ reason: "permanent_failure" });
          complete(item);
        }
        lane.busy = false;
      } else if (item.done || closed) {
        // Dropped by the spool bound while in flight, or shutting down: no retry.
        lane.busy = false;
      } else {
        metrics.deliveryRetries.inc(label);
        let delay = backoffDelay(item.attempts, backoff, random);
        if (result.retryAfterMs !== undefined) {
          delay = Math.min(result.retryAfterMs, maxRetryAfterMs);
          // The receiver asked the whole destination to slow down, not just this trap.
          dest.notBefore = Math.max(dest.notBefore, Date.now() + delay);
        }
        if (!dest.failing) {
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
            delayMs: Math.round(delay),
            message: result.message,
          });
        }
        lane.timer = setTimeout(() => {
          lane.timer = undefined;
          lane.busy = false;
          makeReady(dest, lane);
          pump(dest);
        }, delay);
        updateGauges();
        pump(dest);
        return;
      }
    }
    updateGauges();
    makeReady(dest, lane);
    pump(dest);
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

  const enqueueItem = (rec: SpoolRecord, ref: SpoolRef | undefined, bytes: number): Item | undefined => {
    const url = parse(rec.url);
    if (!url) {
      logger.error("alert callback URL is invalid; alert not delivered", {
        error: new HiveError("DeliveryFailed", "invalid callback URL", { object: rec.url, alertId: rec.id }),
      });
      metrics.alertsDropped.inc({ reason: "permanent_failure" });
      if (ref && spool) spool.ack(ref);
      return undefined;
    }
    compact();
    const item: Item = { rec, ref, bytes, attempts: 0, inFlight: false, done: false };
    all.push(item);
    pendingCount++;
    pendingBytes += bytes;
    const dest = destinationFor(url.origin, url.protocol);
    let lane = dest.lanes.get(rec.trapId);
    if (!lane) {
      lane = { items: [], head: 0, busy: false, queued: false, timer: undefined };
      dest.lanes.set(rec.trapId, lane);
    }
    trimLane(lane);
    lane.items.push(item);
    makeReady(dest, lane);
    pump(dest);
    return item;
  };

  // Alerts spooled before a restart go first, in their original order.
  if (spool) for (const r of spool.recovered) enqueueItem({ ...r, body: "" }, r.ref, r.bytes);
  updateGauges();

  return {
    enqueue(rec) {
      if (closed) throw new HiveError("DeliveryFailed", "alert dispatcher is closed", { object: rec.id });
      let ref: SpoolRef | undefined;
      let bytes: number;
      if (spool) {
        const spooled = spool.append(rec);
        if (!spooled) {
          metrics.alertsDropped.inc({ reason: "too_large" });
          logger.error("alert larger than the spool can hold; dropped", {
            alertId: rec.id,
            bytes: Buffer.byteLength(rec.body) + 128,
          });
          return;
        }
        ref = spooled.ref;
        bytes = spooled.bytes; // measured by the spool already
      } else {
        bytes = Buffer.byteLength(rec.body) + 128;
        if (pendingBytes + bytes > maxPendingBytes) {
          let free = pendingBytes + bytes - maxPendingBytes;
          dropOldest((item) => {
            if (free <= 0) return false;
            if (!item.done) free -= item.bytes;
            return true;
          }, "spool_full");
        }
      }
      const item = enqueueItem(rec, ref, bytes);
      // On disk now: an attempt not made during enqueueItem reads the body back when it is sent.
      if (item && ref && !item.done) item.rec = { ...item.rec, body: "" };
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
      prefixes = byLongestPrefix(list);
      resolved.clear();
    },
    spoolSegmentDropped(segment) {
      // The spool drops whole segments, oldest first: drop the items of that segment and older.
      dropOldest((item) => item.ref === undefined || item.ref.segment <= segment, "spool_full");
    },
  };
}
