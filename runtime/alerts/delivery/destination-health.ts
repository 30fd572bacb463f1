/**
 * Whether a destination is failing, said once per episode rather than once per alert: a
 * warning when it starts failing, an error (and `onAuthFailure`: in the agent a Warning
 * Event, ../auth-failure-event.ts) when it refuses Hive's credentials (401/403/404: being
 * rotated, so alerts are kept and retried), and a line when it accepts alerts again.
 * Further retries log at debug level.
 */
import { HiveError } from "../../../api/errors.ts";
import type { Logger } from "../../log.ts";
import { redact } from "./callback-options.ts";
import type { Item } from "./delivery-queue.ts";
import type { Destination } from "./delivery-scheduler.ts";
import type { PostResult } from "./http-post.ts";

export type AuthFailureHandler = (failure: {
  destination: string;
  status: number | undefined;
  url: string;
}) => void;

/** Records a delivery; true when it ends a failing episode (the others waiting may go now). */
export function noteDelivered(dest: Destination, logger: Logger): boolean {
  if (!dest.failing && !dest.authFailing) return false;
  logger.info("alert callback accepts alerts again", { destination: dest.origin });
  dest.failing = false;
  dest.authFailing = false;
  return true;
}

/** Records a retryable failure of `item`, retried after `delayMs`. */
export function noteRetryableFailure(
  dest: Destination,
  item: Item,
  result: Extract<PostResult, { ok: false }>,
  delayMs: number,
  logger: Logger,
  onAuthFailure: AuthFailureHandler | undefined,
): void {
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
    onAuthFailure?.({ destination: dest.origin, status: result.status, url: redact(item.rec.url) });
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
}
