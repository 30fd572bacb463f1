/**
 * One HTTP POST attempt to a callback, with connect and response timeouts, classified as
 * data: delivered, retryable (refused, reset, timeouts, DNS, 5xx, 401, 403, 404, 408, 425,
 * 429 with its Retry-After) or permanent (every other 4xx, bad URL). Never throws.
 *
 * Node's http/https with a keep-alive Agent per destination; not global fetch, whose pool
 * cannot be given a connect timeout without importing undici.
 */
import http from "node:http";
import https from "node:https";
import type { FailureClass } from "../../metrics/metrics.ts";

export interface PostTimeouts {
  /** TCP (+TLS) connection establishment; default 5 s. */
  connectTimeoutMs: number;
  /** From request sent to the whole response read; default 10 s. */
  responseTimeoutMs: number;
}

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

/** Response bodies are read and discarded; a receiver that streams megabytes is cut off here. */
const MAX_RESPONSE_BYTES = 64 * 1024;
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

function classifyError(error: NodeJS.ErrnoException): { class: FailureClass; retryable: boolean } {
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

function timeoutError(code: string, message: string): NodeJS.ErrnoException {
  const error: NodeJS.ErrnoException = new Error(message);
  error.code = code;
  return error;
}

export function postOnce(
  url: URL,
  body: Buffer,
  headers: Record<string, string>,
  agent: http.Agent,
  timeouts: PostTimeouts,
): Promise<PostResult> {
  return new Promise<PostResult>((resolve) => {
    let settled = false;
    let connectTimer: NodeJS.Timeout | undefined;
    let responseTimer: NodeJS.Timeout | undefined;
    const finish = (result: PostResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(connectTimer);
      clearTimeout(responseTimer);
      resolve(result);
    };
    const fail = (error: NodeJS.ErrnoException) => {
      const c = classifyError(error);
      finish({
        ok: false,
        retryable: c.retryable,
        class: c.class,
        message: error.code ? `${error.code}: ${error.message}` : error.message,
      });
    };
    const client = url.protocol === "https:" ? https : http;
    let req: http.ClientRequest;
    try {
      req = client.request(url, {
        method: "POST",
        agent,
        headers: { ...headers, "content-length": String(body.length) },
      });
    } catch (error) {
      finish({ ok: false, retryable: false, class: "other", message: (error as Error).message });
      return;
    }
    const startResponseTimer = () => {
      responseTimer = setTimeout(
        () =>
          req.destroy(
            timeoutError(
              "HIVE_RESPONSE_TIMEOUT",
              `no complete response within ${timeouts.responseTimeoutMs} ms`,
            ),
          ),
        timeouts.responseTimeoutMs,
      );
    };
    req.on("socket", (socket) => {
      if (socket.connecting) {
        connectTimer = setTimeout(
          () =>
            req.destroy(
              timeoutError("HIVE_CONNECT_TIMEOUT", `not connected within ${timeouts.connectTimeoutMs} ms`),
            ),
          timeouts.connectTimeoutMs,
        );
        socket.once(url.protocol === "https:" ? "secureConnect" : "connect", () => {
          clearTimeout(connectTimer);
          startResponseTimer();
        });
      } else {
        startResponseTimer();
      }
    });
    req.on("error", fail);
    req.on("response", (res) => {
      let received = 0;
      const failed = (res.statusCode ?? 0) >= 300;
      const excerpt: Buffer[] = [];
      let kept = 0;
      res.on("data", (chunk: Buffer) => {
        if (failed && kept < ANSWER_EXCERPT_BYTES) {
          const part = chunk.subarray(0, ANSWER_EXCERPT_BYTES - kept);
          excerpt.push(part);
          kept += part.length;
        }
        received += chunk.length;
        if (received > MAX_RESPONSE_BYTES) res.destroy();
      });
      res.on("error", fail);
      const done = () => {
        const status = res.statusCode ?? 0;
        const c = classifyStatus(status);
        if (c.ok) {
          finish({ ok: true, status });
          return;
        }
        const result: PostResult = {
          ok: false,
          retryable: c.retryable,
          class: c.class ?? "other",
          status,
          message: `HTTP ${status}${res.statusMessage ? ` ${res.statusMessage}` : ""}`,
        };
        // A cut may split a UTF-8 sequence: the decoder shows it as U+FFFD, never throws.
        const answer = Buffer.concat(excerpt).toString("utf8").trim();
        if (answer !== "") result.answer = answer;
        if (status === 429 || status === 503) {
          const header = res.headers["retry-after"];
          const after = parseRetryAfter(Array.isArray(header) ? header[0] : header);
          if (after !== undefined) result.retryAfterMs = after;
        }
        finish(result);
      };
      res.on("end", done);
      // A body cut off by MAX_RESPONSE_BYTES still has a status: use it.
      res.on("close", () => {
        if (!res.complete && received > MAX_RESPONSE_BYTES) done();
      });
      res.on("aborted", () => fail(timeoutError("ECONNRESET", "response aborted")));
    });
    req.end(body);
  });
}
