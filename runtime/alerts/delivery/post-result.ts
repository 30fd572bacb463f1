/**
 * What one POST attempt came to, as data: delivered, retryable (refused, reset, timeouts, DNS,
 * 5xx, 401, 403, 404, 408, 425, 429 with its Retry-After) or permanent (every other 4xx, bad
 * URL). Pure: the socket side is in http-post.ts.
 */
import type { FailureClass } from "../../metrics/metrics.ts";

export type PostResult =
  | { ok: true; status: number }
  | {
      ok: false;
      retryable: boolean;
      class: FailureClass;
      status?: number;
      /** From Retry-After on 429/503, in milliseconds. */
      retryAfterMs?: number;
      message: string;
      /** The start of a refusing receiver's answer (at most ANSWER_EXCERPT_BYTES, UTF-8), for the log. */
      answer?: string;
    };

/** What is kept of an error answer: enough for "invalid_payload" or a JSON error, never a page. */
export const ANSWER_EXCERPT_BYTES = 512;

/** Retry-After as delay-seconds or an HTTP-date (RFC 9110 §10.2.3), in ms; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | undefined, nowMs: number = Date.now()): number | undefined {
  if (value === undefined) return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const date = Date.parse(trimmed);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, date - nowMs);
}

export function classifyError(error: NodeJS.ErrnoException): { class: FailureClass; retryable: boolean } {
  switch (error.code) {
    case "ECONNREFUSED":
      return { class: "refused", retryable: true };
    case "ECONNRESET":
    case "EPIPE":
    case "ECONNABORTED":
    case "UND_ERR_SOCKET":
      return { class: "reset", retryable: true };
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return { class: "dns", retryable: true };
    case "HIVE_CONNECT_TIMEOUT":
      return { class: "connect_timeout", retryable: true };
    case "HIVE_RESPONSE_TIMEOUT":
    case "ETIMEDOUT":
      return { class: "timeout", retryable: true };
    case "CERT_HAS_EXPIRED":
    case "CERT_NOT_YET_VALID":
    case "DEPTH_ZERO_SELF_SIGNED_CERT":
    case "SELF_SIGNED_CERT_IN_CHAIN":
    case "UNABLE_TO_VERIFY_LEAF_SIGNATURE":
    case "UNABLE_TO_GET_ISSUER_CERT_LOCALLY":
    case "ERR_TLS_CERT_ALTNAME_INVALID":
      // The receiver's certificate is not trusted: retried (a renewed certificate or a
      // corrected CA fixes it without losing alerts), and visible as its own class.
      return { class: "tls", retryable: true };
    default:
      if (error.code?.startsWith("ERR_SSL_") || error.code?.startsWith("ERR_TLS_"))
        return { class: "tls", retryable: true };
      // Unknown network errors (EHOSTUNREACH, ENETUNREACH, TLS hiccups…) are worth retrying:
      // a permanent misconfiguration still surfaces in logs and metrics on every attempt.
      return { class: "other", retryable: true };
  }
}

export function classifyStatus(status: number): { ok: boolean; retryable: boolean; class?: FailureClass } {
  if (status >= 200 && status < 300) return { ok: true, retryable: false };
  if (status === 429) return { ok: false, retryable: true, class: "http_429" };
  if (status >= 500) return { ok: false, retryable: true, class: "http_5xx" };
  // Refused credentials change when a Secret is rotated (the agent applies it without a
  // restart): retried with backoff, within the spool's bounds. Receivers often answer 404
  // to a wrong token, to hide that the route exists.
  if (status === 401 || status === 403) return { ok: false, retryable: true, class: "http_auth" };
  // 404, 408 Request Timeout and 425 Too Early invite a retry; other 4xx (and 1xx/3xx, which a
  // POST callback should not answer) will not change by retrying.
  if (status === 404 || status === 408 || status === 425)
    return { ok: false, retryable: true, class: "http_4xx" };
  return { ok: false, retryable: false, class: "http_4xx" };
}

export type PostFailure = Extract<PostResult, { ok: false }>;

/** A request that failed without an answer (socket, DNS, TLS, a timeout of ours). */
export function errorResult(error: NodeJS.ErrnoException): PostFailure {
  const c = classifyError(error);
  return {
    ok: false,
    retryable: c.retryable,
    class: c.class,
    message: error.code ? `${error.code}: ${error.message}` : error.message,
  };
}

/**
 * A complete answer: its status classified, with the start of a refusal's body (`answer`,
 * trimmed; "" for none) and, on 429/503, the Retry-After header read.
 */
export function responseResult(
  status: number,
  statusMessage: string | undefined,
  answer: string,
  retryAfter: string | string[] | undefined,
): PostResult {
  const c = classifyStatus(status);
  if (c.ok) return { ok: true, status };
  const result: PostFailure = {
    ok: false,
    retryable: c.retryable,
    class: c.class ?? "other",
    status,
    message: `HTTP ${status}${statusMessage ? ` ${statusMessage}` : ""}`,
  };
  if (answer !== "") result.answer = answer;
  if (status === 429 || status === 503) {
    const after = parseRetryAfter(Array.isArray(retryAfter) ? retryAfter[0] : retryAfter);
    if (after !== undefined) result.retryAfterMs = after;
  }
  return result;
}

/** The start of a refusing receiver's answer, at most ANSWER_EXCERPT_BYTES; the rest is not kept. */
export class AnswerExcerpt {
  private readonly parts: Buffer[] = [];
  private kept = 0;
  private readonly keep: boolean;

  /** `keep` false: nothing is kept (a success's body is of no interest). */
  constructor(keep: boolean) {
    this.keep = keep;
  }

  add(chunk: Buffer): void {
    if (!this.keep || this.kept >= ANSWER_EXCERPT_BYTES) return;
    const part = chunk.subarray(0, ANSWER_EXCERPT_BYTES - this.kept);
    this.parts.push(part);
    this.kept += part.length;
  }

  /** Trimmed; a cut may split a UTF-8 sequence: the decoder shows it as U+FFFD, never throws. */
  text(): string {
    return Buffer.concat(this.parts).toString("utf8").trim();
  }
}
