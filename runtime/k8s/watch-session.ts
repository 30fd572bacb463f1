/**
 * One WATCH request, from opening it to how it ended. The outcome tells the reflector what
 * comes next: re-list (410 Gone), resume after a backoff (a failure), or resume at once (a
 * stream that ran its course).
 */

import type { Logger } from "../log.ts";
import { apiFailure, isGone } from "./api-errors.ts";
import type { WatchApi } from "./kube-watch.ts";

export type WatchOutcome =
  | { kind: "gone" }
  | { kind: "error"; err: unknown; healthy: boolean }
  | { kind: "closed"; idle: boolean };

/** A watch that ends sooner than this having delivered nothing counts as a failure (no hot loop). */
export const MIN_HEALTHY_WATCH_MS = 1000;

export interface WatchRequest {
  watch: WatchApi;
  path: string;
  query: Record<string, string | number | boolean>;
  log: Logger;
  /** Counted per event received, BOOKMARKs and ERRORs included. */
  stats: { events: number };
  /** ADDED, MODIFIED, DELETED, BOOKMARK: applied by the caller. A throw is logged, not fatal. */
  onEvent: (type: string, raw: unknown) => void;
  /** Checked when the stream opens: a stop() that came before it aborts it at once. */
  isStopped: () => boolean;
}

/** The WATCH query: from `resourceVersion`, with bookmarks, timing out after base to 2× base s. */
export function watchQuery(
  resourceVersion: string,
  opts: { watchTimeoutSeconds?: number; labelSelector?: string; fieldSelector?: string },
  random: () => number = Math.random,
): Record<string, string | number | boolean> {
  const base = opts.watchTimeoutSeconds ?? 300;
  const query: Record<string, string | number | boolean> = {
    allowWatchBookmarks: true,
    resourceVersion,
    // Spread over base … 2× base so that many informers do not all reconnect at once.
    timeoutSeconds: Math.floor(base * (1 + random())),
  };
  if (opts.labelSelector) query.labelSelector = opts.labelSelector;
  if (opts.fieldSelector) query.fieldSelector = opts.fieldSelector;
  return query;
}

/** How a watch ended, from what ended it, whether it saw 410, and what it delivered in how long. */
export function watchOutcome(end: {
  err: unknown;
  gone: boolean;
  delivered: number;
  elapsedMs: number;
}): WatchOutcome {
  const { err, delivered, elapsedMs } = end;
  if (end.gone || (err && isGone(err))) return { kind: "gone" };
  if (err && !isBenignEnd(err))
    return { kind: "error", err, healthy: delivered > 0 || elapsedMs >= MIN_HEALTHY_WATCH_MS };
  // A watch that ran its course (server timeout, client inactivity timeout, quiet resource)
  // resumes at once; only one that ends immediately with nothing to show is paced.
  return { kind: "closed", idle: delivered === 0 && elapsedMs < MIN_HEALTHY_WATCH_MS };
}

/** A watch that ended because the stream closed or timed out is resumed, not counted as a failure. */
export function isBenignEnd(err: unknown): boolean {
  const name = (err as { name?: string })?.name;
  return name === "TimeoutError" || name === "AbortError";
}

export class WatchSession {
  /** Resolves once, when the stream has ended. */
  readonly outcome: Promise<WatchOutcome>;
  private controller: AbortController | undefined;
  private gone = false;
  /** Object events (not bookmarks or errors) delivered so far. */
  private delivered = 0;
  private settled = false;
  private readonly startedAt = performance.now();
  private resolve: (outcome: WatchOutcome) => void = () => {};
  private readonly req: WatchRequest;

  /** Opens the stream at once; `outcome` tells how it ended. */
  constructor(req: WatchRequest) {
    this.req = req;
    this.outcome = new Promise((resolve) => {
      this.resolve = resolve;
    });
    req.watch.watch(req.path, req.query, this.onEvent, this.finish).then(
      (controller) => {
        if (this.settled) return;
        this.controller = controller;
        if (req.isStopped()) controller.abort();
      },
      (err: unknown) => this.finish(err),
    );
  }

  /** Ends the stream, if open; its outcome follows from the watch's own end. */
  abort(): void {
    this.controller?.abort();
  }

  private readonly onEvent = (type: string, raw: unknown): void => {
    try {
      this.req.stats.events++;
      if (type !== "ERROR" && type !== "BOOKMARK") this.delivered++;
      if (type === "ERROR") {
        this.onErrorEvent(raw);
        return;
      }
      this.req.onEvent(type, raw);
    } catch (err) {
      this.req.log.error("could not process a watch event", { type, error: err });
    }
  };

  /** An ERROR event ends the watch: 410 means re-list, anything else is a failure. */
  private onErrorEvent(status: unknown): void {
    if (apiFailure(status).code === 410) this.gone = true;
    else this.req.log.warn("watch ERROR event", { status });
    this.abort();
    this.finish(this.gone ? undefined : status);
  }

  private readonly finish = (err: unknown): void => {
    if (this.settled) return;
    this.settled = true;
    this.controller = undefined;
    const elapsedMs = performance.now() - this.startedAt;
    this.resolve(watchOutcome({ err, gone: this.gone, delivered: this.delivered, elapsedMs }));
  };
}
