/**
 * A real HTTP alert receiver on 127.0.0.1 with fault injection, for the delivery tests.
 * Each request is answered by `fault(n, req)` (n counts requests from 1): a normal 200, a
 * status (with headers), a delay before answering, a connection reset after reading the
 * request, or a response that never comes. `down()`/`up()` stop and restart listening on
 * the same port, which makes connections fail with ECONNREFUSED in between.
 */
import http from "node:http";
import https from "node:https";
import type { AddressInfo, Socket } from "node:net";

export type FaultAction =
  | { kind: "ok" }
  | { kind: "status"; status: number; headers?: Record<string, string>; body?: string }
  /** Recorded as accepted on arrival, answered 200 after `ms`. */
  | { kind: "delay"; ms: number }
  | { kind: "reset" }
  | { kind: "hang" };

export interface Received {
  id: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  at: number;
}

export interface Receiver {
  readonly url: string;
  readonly port: number;
  /** Requests answered with 2xx, in arrival order. */
  readonly accepted: Received[];
  /** Every request that reached the server (whatever the answer). */
  readonly requests: number;
  /** TCP connections accepted so far (keep-alive reuse keeps this low). */
  readonly connections: number;
  /** Most requests open at the same time (arrival to answer). */
  readonly maxConcurrent: number;
  /** `body`: the request's body as received (UTF-8). */
  fault: (n: number, req: http.IncomingMessage, body: string) => FaultAction;
  down(): Promise<void>;
  up(): Promise<void>;
  close(): Promise<void>;
  /** Resolves when `accepted` holds at least `count` distinct alert ids. */
  waitForDistinct(count: number, timeoutMs?: number): Promise<void>;
}

/** `tls`: serve HTTPS with this key and certificate (PEM). */
export async function startReceiver(port = 0, tls?: { key: string; cert: string }): Promise<Receiver> {
  const accepted: Received[] = [];
  const sockets = new Set<Socket>();
  let requests = 0;
  let connections = 0;
  let open = 0;
  let maxConcurrent = 0;
  const waiters: { count: number; resolve: () => void }[] = [];
  const distinct = () => new Set(accepted.map((r) => r.id)).size;
  const notify = () => {
    const d = distinct();
    for (const w of [...waiters]) {
      if (d >= w.count) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve();
      }
    }
  };

  const receiver: Receiver = {
    url: "",
    port: 0,
    accepted,
    get requests() {
      return requests;
    },
    get connections() {
      return connections;
    },
    get maxConcurrent() {
      return maxConcurrent;
    },
    fault: () => ({ kind: "ok" }),
    down: async () => {},
    up: async () => {},
    close: async () => {},
    waitForDistinct(count, timeoutMs = 20_000) {
      if (distinct() >= count) return Promise.resolve();
      return new Promise<void>((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`receiver got ${distinct()} distinct alerts, expected ${count}`)),
          timeoutMs,
        );
        waiters.push({
          count,
          resolve: () => {
            clearTimeout(timer);
            resolve();
          },
        });
      });
    },
  };

  const handler = (req: http.IncomingMessage, res: http.ServerResponse) => {
    open++;
    maxConcurrent = Math.max(maxConcurrent, open);
    res.on("close", () => open--);
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const n = ++requests;
      const body = Buffer.concat(chunks).toString("utf8");
      const action = receiver.fault(n, req, body);
      const id = String(req.headers["hive-alert-id"] ?? "");
      const accept = (status = 200) => {
        if (status >= 200 && status < 300) {
          accepted.push({ id, headers: req.headers, body, at: Date.now() });
          notify();
        }
        res.writeHead(status, { "content-type": "text/plain" }).end("ok");
      };
      switch (action.kind) {
        case "ok":
          accept();
          return;
        case "status":
          res.writeHead(action.status, action.headers).end(action.body ?? `status ${action.status}`);
          return;
        case "delay":
          // Processed (recorded) at once, answered late: a client that times out will send a duplicate.
          accepted.push({ id, headers: req.headers, body, at: Date.now() });
          notify();
          setTimeout(() => {
            if (!res.destroyed) res.writeHead(200).end("ok");
          }, action.ms);
          return;
        case "reset":
          req.socket.resetAndDestroy();
          return;
        case "hang":
          return;
      }
    });
  };

  let server: http.Server | https.Server | undefined;
  const listen = (p: number) =>
    new Promise<number>((resolve, reject) => {
      const s = tls ? https.createServer(tls, handler) : http.createServer(handler);
      s.keepAliveTimeout = 30_000;
      s.on("connection", (socket: Socket) => {
        connections++;
        sockets.add(socket);
        socket.on("close", () => sockets.delete(socket));
      });
      s.once("error", reject);
      s.listen(p, "127.0.0.1", () => {
        server = s;
        resolve((s.address() as AddressInfo).port);
      });
    });
  const stop = () =>
    new Promise<void>((resolve) => {
      const s = server;
      server = undefined;
      if (!s) return resolve();
      for (const socket of sockets) socket.destroy();
      s.close(() => resolve());
    });

  const actual = await listen(port);
  Object.assign(receiver, {
    url: `${tls ? "https" : "http"}://127.0.0.1:${actual}/alerts`,
    port: actual,
    down: stop,
    up: async () => {
      await listen(actual);
    },
    close: stop,
  });
  return receiver;
}
