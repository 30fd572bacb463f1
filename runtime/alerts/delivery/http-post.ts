/**
 * One HTTP POST attempt to a callback, with connect and response timeouts; what it came to is
 * classified as data (delivered, retryable or permanent: post-result.ts). Never throws.
 *
 * Node's http/https with a keep-alive Agent per destination; not global fetch, whose pool
 * cannot be given a connect timeout without importing undici.
 */
import http from "node:http";
import https from "node:https";
import { AnswerExcerpt, errorResult, type PostResult, responseResult } from "./post-result.ts";

export {
  ANSWER_EXCERPT_BYTES,
  classifyStatus,
  type PostResult,
  parseRetryAfter,
} from "./post-result.ts";

export interface PostTimeouts {
  /** TCP (+TLS) connection establishment; default 5 s. */
  connectTimeoutMs: number;
  /** From request sent to the whole response read; default 10 s. */
  responseTimeoutMs: number;
}

function timeoutError(code: string, message: string): NodeJS.ErrnoException {
  const error: NodeJS.ErrnoException = new Error(message);
  error.code = code;
  return error;
}

/** Response bodies are read and discarded; a receiver that streams megabytes is cut off here. */
const MAX_RESPONSE_BYTES = 64 * 1024;

/** One POST: resolved once, by whichever comes first (answer, error or timeout); never rejects. */
export function postOnce(
  url: URL,
  body: Buffer,
  headers: Record<string, string>,
  agent: http.Agent,
  timeouts: PostTimeouts,
): Promise<PostResult> {
  return new Promise<PostResult>((resolve) => {
    const attempt = new PostAttempt(resolve, timeouts);
    const client = url.protocol === "https:" ? https : http;
    let req: http.ClientRequest;
    try {
      req = client.request(url, {
        method: "POST",
        agent,
        headers: { ...headers, "content-length": String(body.length) },
      });
    } catch (error) {
      attempt.finish({ ok: false, retryable: false, class: "other", message: (error as Error).message });
      return;
    }
    attempt.watchTimeouts(req, url.protocol === "https:");
    req.on("error", (error) => attempt.fail(error));
    req.on("response", (res) => attempt.readResponse(res));
    req.end(body);
  });
}

/** One POST's state: settled once (the first outcome wins), its timers cleared with it. */
class PostAttempt {
  private settled = false;
  private connectTimer: NodeJS.Timeout | undefined;
  private responseTimer: NodeJS.Timeout | undefined;
  private readonly resolve: (result: PostResult) => void;
  private readonly timeouts: PostTimeouts;

  constructor(resolve: (result: PostResult) => void, timeouts: PostTimeouts) {
    this.resolve = resolve;
    this.timeouts = timeouts;
  }

  finish(result: PostResult): void {
    if (this.settled) return;
    this.settled = true;
    clearTimeout(this.connectTimer);
    clearTimeout(this.responseTimer);
    this.resolve(result);
  }

  fail(error: NodeJS.ErrnoException): void {
    this.finish(errorResult(error));
  }

  /** The connect timeout runs while a new socket connects; the response timeout from then on. */
  watchTimeouts(req: http.ClientRequest, secure: boolean): void {
    const { connectTimeoutMs } = this.timeouts;
    req.on("socket", (socket) => {
      // A pooled keep-alive socket is connected already.
      if (!socket.connecting) {
        this.startResponseTimer(req);
        return;
      }
      this.connectTimer = setTimeout(
        () =>
          req.destroy(timeoutError("HIVE_CONNECT_TIMEOUT", `not connected within ${connectTimeoutMs} ms`)),
        connectTimeoutMs,
      );
      socket.once(secure ? "secureConnect" : "connect", () => {
        clearTimeout(this.connectTimer);
        this.startResponseTimer(req);
      });
    });
  }

  private startResponseTimer(req: http.ClientRequest): void {
    const { responseTimeoutMs } = this.timeouts;
    this.responseTimer = setTimeout(
      () =>
        req.destroy(
          timeoutError("HIVE_RESPONSE_TIMEOUT", `no complete response within ${responseTimeoutMs} ms`),
        ),
      responseTimeoutMs,
    );
  }

  /** Reads the answer to its end (discarding it, but for the start of a refusal) and settles. */
  readResponse(res: http.IncomingMessage): void {
    const status = res.statusCode ?? 0;
    const answer = new AnswerExcerpt(status >= 300);
    let received = 0;
    res.on("data", (chunk: Buffer) => {
      answer.add(chunk);
      received += chunk.length;
      if (received > MAX_RESPONSE_BYTES) res.destroy();
    });
    res.on("error", (error) => this.fail(error));
    const done = () =>
      this.finish(responseResult(status, res.statusMessage, answer.text(), res.headers["retry-after"]));
    res.on("end", done);
    // A body cut off by MAX_RESPONSE_BYTES still has a status: use it.
    res.on("close", () => {
      if (!res.complete && received > MAX_RESPONSE_BYTES) done();
    });
    res.on("aborted", () => this.fail(timeoutError("ECONNRESET", "response aborted")));
  }
}
