/**
 * A Kubernetes watch: GET ?watch=true, one JSON event per line. The callback gets each event's
 * type and object; `done` is called exactly once, when the stream ends (null), fails, or sees no
 * byte for `requestTimeoutMs` (a TimeoutError: a dead peer sends no FIN). The same contract as
 * client-node's Watch, which the informer's sessions were written against.
 */
import { createInterface } from "node:readline";
import type { KubeHttp } from "./kube-http.ts";

export type WatchCallback = (type: string, object: unknown, event: unknown) => void;

/** What a watch session needs: client-node's Watch fits it too. */
export interface WatchApi {
  watch(
    path: string,
    query: Record<string, unknown>,
    callback: WatchCallback,
    done: (err: unknown) => void,
  ): Promise<AbortController>;
}

export class KubeWatch implements WatchApi {
  /** How long the stream may be silent before it is given up. */
  readonly requestTimeoutMs: number;
  private readonly http: KubeHttp;

  constructor(http: KubeHttp, requestTimeoutMs: number) {
    this.http = http;
    this.requestTimeoutMs = requestTimeoutMs;
  }

  async watch(
    path: string,
    query: Record<string, unknown>,
    callback: WatchCallback,
    done: (err: unknown) => void,
  ): Promise<AbortController> {
    const controller = new AbortController();
    const idle = new IdleTimer(this.requestTimeoutMs, () =>
      finish(new DOMException("The operation was aborted due to timeout", "TimeoutError")),
    );
    let finished = false;
    const finish = (err: unknown) => {
      if (finished) return;
      finished = true;
      idle.clear();
      controller.abort();
      done(err);
    };
    try {
      const res = await this.http.stream(path, {
        query: { ...query, watch: "true" },
        signal: controller.signal,
      });
      idle.reset();
      res.on("data", () => idle.reset());
      res.on("error", finish);
      res.on("close", () => finish(null));
      const lines = createInterface({ input: res, crlfDelay: Infinity });
      // readline passes the stream's errors on: unheard, an aborted watch would throw.
      lines.on("error", finish);
      lines.on("line", (line) => deliver(line, callback));
    } catch (err) {
      finish(err);
    }
    return controller;
  }
}

/** A line that is not an event (a keep-alive blank, a torn write) is skipped, as client-node does. */
function deliver(line: string, callback: WatchCallback): void {
  if (line.trim() === "") return;
  let event: { type?: unknown; object?: unknown };
  try {
    event = JSON.parse(line) as { type?: unknown; object?: unknown };
  } catch {
    return;
  }
  callback(String(event.type), event.object, event);
}

class IdleTimer {
  private timer: NodeJS.Timeout | undefined;
  private readonly ms: number;
  private readonly onIdle: () => void;
  constructor(ms: number, onIdle: () => void) {
    this.ms = ms;
    this.onIdle = onIdle;
    this.reset();
  }
  reset(): void {
    this.clear();
    this.timer = setTimeout(this.onIdle, this.ms);
    this.timer.unref();
  }
  clear(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }
}
