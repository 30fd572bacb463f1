/**
 * Taking an alert in for delivery: its destination from the callback URL, its place in the
 * spool (or, without one, room made for it in memory), then its trap's lane, where it may be
 * sent at once. An alert that cannot be taken (invalid URL, refused by the spool) is counted
 * as dropped and logged; nothing here throws.
 */
import { HiveError } from "../../../api/errors.ts";
import type { Logger } from "../../log.ts";
import type { HiveMetrics } from "../../metrics/metrics.ts";
import type { RecoveredRecord, Spool, SpoolRecord, SpoolRef, SpoolRefusal } from "../spool/spool.ts";
import type { DeliveryBacklog } from "./delivery-backlog.ts";
import type { Item } from "./delivery-queue.ts";
import type { DeliveryScheduler, Destination } from "./delivery-scheduler.ts";

/** What intake works with; all of it is owned by the dispatcher. */
export interface IntakeContext {
  logger: Logger;
  metrics: HiveMetrics;
  spool: Spool | undefined;
  scheduler: DeliveryScheduler;
  backlog: DeliveryBacklog;
  parse: (url: string) => URL | undefined;
}

/** Bytes an alert counts for while it waits: its body plus a record's overhead. */
export const alertBytes = (rec: Pick<SpoolRecord, "body">): number => Buffer.byteLength(rec.body) + 128;

/** The log line for an alert the spool refused. */
export function refusalMessage(refused: SpoolRefusal["refused"]): string {
  return refused === "too_large"
    ? "alert larger than the spool can hold; dropped"
    : "alert spool cannot write and its memory buffer is full; alert dropped";
}

/** Queues a new alert for its callback; spooled first when there is a spool. */
export function enqueueAlert(ctx: IntakeContext, rec: SpoolRecord): void {
  const { scheduler, backlog, spool } = ctx;
  if (scheduler.isClosed) {
    ctx.logger.error("alert dispatcher is closed; alert not delivered", { alertId: rec.id });
    return;
  }
  const url = ctx.parse(rec.url);
  if (!url) {
    dropInvalidUrl(ctx, rec, undefined);
    return;
  }
  const dest = scheduler.destinationFor(url.origin, url.protocol);
  let ref: SpoolRef | undefined;
  let bytes: number;
  if (spool) {
    const spooled = appendToSpool(ctx, spool, rec);
    if (!spooled) {
      backlog.updateGauges();
      return;
    }
    ({ ref, bytes } = spooled);
  } else {
    bytes = alertBytes(rec);
    backlog.makeRoom(dest, bytes);
  }
  const item = queueItem(ctx, dest, rec, ref, bytes);
  // In the spool now: an attempt not made during queueItem reads the body back from there.
  if (ref && !item.done) item.rec = { ...item.rec, body: "" };
  backlog.updateGauges();
}

/** Queues the alerts spooled before a restart, in their original order (bodies stay on disk). */
export function requeueRecovered(ctx: IntakeContext, recovered: readonly RecoveredRecord[]): void {
  for (const r of recovered) {
    const rec = { ...r, body: "" };
    const url = ctx.parse(r.url);
    if (!url) dropInvalidUrl(ctx, rec, r.ref);
    else queueItem(ctx, ctx.scheduler.destinationFor(url.origin, url.protocol), rec, r.ref, r.bytes);
  }
}

/** Counts the item in the backlog and puts it in its trap's lane (it may be sent at once). */
function queueItem(
  ctx: IntakeContext,
  dest: Destination,
  rec: SpoolRecord,
  ref: SpoolRef | undefined,
  bytes: number,
): Item {
  const item: Item = { rec, ref, bytes, attempts: 0, inFlight: false, done: false, origin: dest.origin };
  ctx.backlog.add(dest, item);
  ctx.scheduler.add(dest, item);
  return item;
}

function dropInvalidUrl(ctx: IntakeContext, rec: SpoolRecord, ref: SpoolRef | undefined): void {
  ctx.logger.error("alert callback URL is invalid; alert not delivered", {
    error: new HiveError("DeliveryFailed", "invalid callback URL", { object: rec.url, alertId: rec.id }),
  });
  ctx.metrics.alertsDropped.inc({ reason: "permanent_failure" });
  if (ref && ctx.spool) ctx.spool.ack(ref);
}

/** Appends to the spool; a refusal (or an unexpected failure) is counted and the alert dropped. */
function appendToSpool(
  ctx: IntakeContext,
  spool: Spool,
  rec: SpoolRecord,
): { ref: SpoolRef; bytes: number } | undefined {
  let result: ReturnType<Spool["append"]>;
  try {
    result = spool.append(rec);
  } catch (error) {
    result = { refused: "spool_unwritable" };
    ctx.logger.error("alert spool failed to take an alert", { error, alertId: rec.id });
  }
  if ("ref" in result) return result;
  ctx.metrics.alertsDropped.inc({ reason: result.refused });
  ctx.logger.error(refusalMessage(result.refused), {
    alertId: rec.id,
    bytes: alertBytes(rec),
    reason: result.refused,
  });
  return undefined;
}
