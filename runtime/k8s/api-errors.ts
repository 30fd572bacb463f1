/**
 * Reading Kubernetes API failures: the HTTP code and the Status reason, whichever shape the
 * error came in (the agent's KubeApiError, client-node's ApiException, an Error with statusCode,
 * an ERROR watch event's Status object).
 */
import { HiveError } from "../../api/errors.ts";

export interface ApiFailure {
  code: number | undefined;
  reason: string | undefined;
  message: string;
}

function parseBody(body: unknown): Record<string, unknown> | undefined {
  if (typeof body === "string") {
    try {
      const parsed: unknown = JSON.parse(body);
      return parsed !== null && typeof parsed === "object" ? (parsed as Record<string, unknown>) : undefined;
    } catch {
      return undefined; // a body that is not JSON carries no Status; the code still tells what happened
    }
  }
  return body !== null && typeof body === "object" ? (body as Record<string, unknown>) : undefined;
}

export function apiFailure(err: unknown): ApiFailure {
  if (err === null || typeof err !== "object")
    return { code: undefined, reason: undefined, message: String(err) };
  const e = err as {
    code?: unknown;
    statusCode?: unknown;
    body?: unknown;
    message?: unknown;
    kind?: unknown;
    reason?: unknown;
  };
  if (e.kind === "Status") {
    return {
      code: typeof e.code === "number" ? e.code : undefined,
      reason: typeof e.reason === "string" ? e.reason : undefined,
      message: typeof e.message === "string" ? e.message : "",
    };
  }
  const body = parseBody(e.body);
  const code =
    typeof e.code === "number" ? e.code : typeof e.statusCode === "number" ? e.statusCode : undefined;
  const reason = typeof body?.reason === "string" ? body.reason : undefined;
  const message =
    typeof body?.message === "string"
      ? body.message
      : typeof e.message === "string"
        ? e.message
        : String(err);
  return { code, reason, message };
}

export const isNotFound = (err: unknown): boolean => apiFailure(err).code === 404;
export const isConflict = (err: unknown): boolean =>
  apiFailure(err).code === 409 && apiFailure(err).reason !== "AlreadyExists";
export const isAlreadyExists = (err: unknown): boolean => apiFailure(err).reason === "AlreadyExists";
export const isGone = (err: unknown): boolean => apiFailure(err).code === 410;
/** A list asked for a resourceVersion the (lagging) server has not reached yet: 504 "Too large resource version". */
export const isTooLargeResourceVersion = (err: unknown): boolean => {
  const f = apiFailure(err);
  return f.code === 504 && /too large resource version/i.test(f.message);
};

/** Wraps an API failure as a HiveError naming the request and the object. */
export function apiError(what: string, object: string, err: unknown): HiveError {
  const f = apiFailure(err);
  return new HiveError(
    "ApiRequestFailed",
    `${what} failed${f.code ? ` (HTTP ${f.code}${f.reason ? ` ${f.reason}` : ""})` : ""}: ${f.message.split("\n")[0]}`,
    {
      object,
      hint:
        f.code === 403
          ? "the agent's ServiceAccount lacks RBAC for this request; check the ClusterRole the component installs"
          : "the request is retried with backoff; check API server reachability if this persists",
      cause: err,
      status: f.code,
      reason: f.reason,
    },
  );
}
