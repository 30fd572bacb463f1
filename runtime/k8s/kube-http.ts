/**
 * Requests to the Kubernetes API over Node's own http/https: one keep-alive agent per client (so
 * requests share connections), the bearer token read again as its file rotates, JSON in and out.
 * A failure is a KubeApiError with the HTTP code and the server's Status as the body, the shape
 * api-errors.ts reads.
 */
import { readFileSync, statSync } from "node:fs";
import http, { type IncomingMessage } from "node:http";
import https from "node:https";
import type { Socket } from "node:net";
import type { KubeConnection } from "./kube-connection.ts";

export type HttpMethod = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";

export interface KubeRequest {
  /** Each value set as text; undefined ones left out. */
  query?: Record<string, unknown>;
  body?: unknown;
  /** Default: application/json for a body. */
  contentType?: string;
  signal?: AbortSignal;
}

/** An answer other than 2xx: `code` is the HTTP status, `body` the server's Status (or its text). */
export class KubeApiError extends Error {
  readonly code: number;
  readonly body: unknown;
  constructor(method: string, path: string, code: number, body: unknown) {
    const status = body as { message?: unknown } | undefined;
    const detail = typeof status?.message === "string" ? status.message : http.STATUS_CODES[code];
    super(`${method} ${path}: HTTP ${code}: ${detail ?? ""}`);
    this.name = "KubeApiError";
    this.code = code;
    this.body = body;
  }
}

/** How long a request may see no byte before it is abandoned (undici's default, as client-node had). */
const IDLE_TIMEOUT_MS = 300_000;
/** How long a new connection may take, TLS handshake included (undici's default too). */
const CONNECT_TIMEOUT_MS = 10_000;

export class KubeHttp {
  readonly server: string;
  private readonly agent: http.Agent;
  private readonly secure: boolean;
  private readonly conn: KubeConnection;
  private readonly connectTimeoutMs: number;
  /** The token file's content, and which version of the file it came from. */
  private token: { value: string; version: string } | undefined;

  constructor(conn: KubeConnection, options: { connectTimeoutMs?: number } = {}) {
    this.conn = conn;
    this.connectTimeoutMs = options.connectTimeoutMs ?? CONNECT_TIMEOUT_MS;
    this.server = conn.server;
    this.secure = conn.server.startsWith("https:");
    this.agent = this.secure
      ? new https.Agent({
          keepAlive: true,
          ...(conn.ca ? { ca: conn.ca } : {}),
          ...(conn.cert ? { cert: conn.cert } : {}),
          ...(conn.key ? { key: conn.key } : {}),
          ...(conn.tlsServerName ? { servername: conn.tlsServerName } : {}),
          rejectUnauthorized: !conn.insecureSkipTLSVerify,
        })
      : new http.Agent({ keepAlive: true });
  }

  /** The JSON answer of a request (undefined for an empty one); a KubeApiError for a non-2xx. */
  async request(method: HttpMethod, path: string, req: KubeRequest = {}): Promise<unknown> {
    const res = await this.send(method, path, req);
    const text = await readText(res);
    const body = parseJson(text);
    const code = res.statusCode ?? 0;
    if (code < 200 || code > 299) throw new KubeApiError(method, path, code, body);
    return body;
  }

  /** A streaming GET (watches): the response once its headers are in; a KubeApiError for non-2xx. */
  async stream(path: string, req: KubeRequest): Promise<IncomingMessage> {
    const res = await this.send("GET", path, req);
    const code = res.statusCode ?? 0;
    if (code >= 200 && code <= 299) return res;
    throw new KubeApiError("GET", path, code, parseJson(await readText(res)));
  }

  private send(method: HttpMethod, path: string, req: KubeRequest): Promise<IncomingMessage> {
    const url = new URL(this.server + path);
    for (const [key, value] of Object.entries(req.query ?? {}))
      if (value !== undefined) url.searchParams.set(key, String(value));
    const payload = req.body === undefined ? undefined : JSON.stringify(req.body);
    const headers: Record<string, string> = { accept: "application/json", "user-agent": "hive-agent" };
    const token = this.bearer();
    if (token) headers.authorization = `Bearer ${token}`;
    if (payload !== undefined) {
      headers["content-type"] = req.contentType ?? "application/json";
      headers["content-length"] = String(Buffer.byteLength(payload));
    }
    const lib = this.secure ? https : http;
    return new Promise((resolve, reject) => {
      const request = lib.request(url, {
        method,
        headers,
        agent: this.agent,
        timeout: IDLE_TIMEOUT_MS,
        ...(req.signal ? { signal: req.signal } : {}),
      });
      request.on("response", resolve);
      request.on("error", reject);
      request.on("socket", (socket) => this.limitConnect(request, socket));
      request.on("timeout", () =>
        request.destroy(
          new DOMException(`no answer from ${method} ${path} in ${IDLE_TIMEOUT_MS} ms`, "TimeoutError"),
        ),
      );
      request.end(payload);
    });
  }

  /**
   * A new connection that is not up (TCP and TLS) in time is given up: a server that accepts and
   * never answers its handshake would otherwise hold the request for the whole idle timeout.
   */
  private limitConnect(request: http.ClientRequest, socket: Socket): void {
    if (!socket.connecting) return; // a kept-alive connection, up already
    const timer = setTimeout(
      () =>
        request.destroy(
          new DOMException(`no connection to ${this.server} in ${this.connectTimeoutMs} ms`, "TimeoutError"),
        ),
      this.connectTimeoutMs,
    );
    socket.once(this.secure ? "secureConnect" : "connect", () => clearTimeout(timer));
    request.once("close", () => clearTimeout(timer));
  }

  /**
   * The token file is read again whenever it changed: the kubelet rotates a projected service
   * account token by swapping the file (a new inode), hourly by default.
   */
  private bearer(): string | undefined {
    const file = this.conn.tokenFile;
    if (!file) return this.conn.token;
    const stat = statSync(file);
    const version = `${stat.ino}:${stat.mtimeMs}:${stat.size}`;
    if (this.token?.version !== version) this.token = { value: readFileSync(file, "utf8").trim(), version };
    return this.token.value;
  }
}

function readText(res: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on("data", (chunk: Buffer) => chunks.push(chunk));
    res.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    res.on("error", reject);
    res.on("aborted", () => reject(new Error("the API server closed the connection mid-answer")));
  });
}

/** A body that is not JSON is kept as text: the code still tells what happened. */
function parseJson(text: string): unknown {
  if (text === "") return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
