/**
 * The informer's reflector, as in client-go: LIST, then WATCH from the list's resourceVersion,
 * resuming a dropped or timed-out watch from the last version seen (event or bookmark), and
 * re-listing when that history is gone (410). Failures retry with capped, jittered backoff.
 * What it lists and sees goes to a sink (the store and handlers); it keeps no objects itself.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { KubernetesObject } from "@kubernetes/client-node";
import { backoffDelay } from "../backoff.ts";
import type { Logger } from "../log.ts";
import { apiFailure } from "./api-errors.ts";
import type { WatchApi } from "./kube-watch.ts";
import { listAll } from "./list-pager.ts";
import type { ListFn } from "./resource-lister.ts";
import { type WatchOutcome, WatchSession, watchQuery } from "./watch-session.ts";

export interface InformerStats {
  /** Complete LISTs (initial + re-lists). */
  lists: number;
  /** LIST requests (pages). */
  listPages: number;
  /** WATCH requests started. */
  watches: number;
  /** Re-lists forced by 410 Gone. */
  relists: number;
  /** Failed requests and ERROR events. */
  errors: number;
  /** Watch events received (BOOKMARKs included). */
  events: number;
}

/** Where the reflector delivers: client-go's Store (Replace, and Add/Update/Delete by event). */
export interface ReflectorSink<T> {
  /** A complete LIST, the collection's new contents. */
  replace(items: T[]): void;
  /** One watch event's object (ADDED, MODIFIED, DELETED or another type, ignored by the store). */
  event(type: string, obj: T): void;
}

/** Read at each use, as the informer's options they come from. */
export interface ReflectorConfig {
  labelSelector?: string;
  fieldSelector?: string;
  pageSize?: number;
  backoff?: { baseMs: number; maxMs: number };
  watchTimeoutSeconds?: number;
}

export interface ReflectorOptions<T> {
  path: string;
  watch: WatchApi;
  listFn: ListFn<T>;
  decode: (raw: unknown) => T;
  transform: (obj: T) => T;
  config: ReflectorConfig;
  stats: InformerStats;
  log: Logger;
  sink: ReflectorSink<T>;
}

/**
 * What the next LIST asks for (client-go's relistResourceVersion): "0" (the watch cache) before
 * the first list, then never older than what the handlers saw; undefined is a consistent read.
 */
export function relistResourceVersion(lastSeen: string, lastSeenUnavailable: boolean): string | undefined {
  if (lastSeenUnavailable) return undefined;
  return lastSeen === "" ? "0" : lastSeen;
}

export class Reflector<T extends KubernetesObject> {
  /** The last resourceVersion seen (from a list, an event or a bookmark): where a watch resumes. */
  private rv = "";
  /** The last list's version is gone or ahead of the server: the next LIST is a consistent read. */
  private rvUnavailable = false;
  /** Failures in a row, for the backoff. */
  private attempt = 0;
  private stopped = false;
  private session: WatchSession | undefined;
  private readonly stopSignal = new AbortController();
  private readonly opts: ReflectorOptions<T>;

  constructor(options: ReflectorOptions<T>) {
    this.opts = options;
  }

  resourceVersion(): string {
    return this.rv;
  }

  /** Ends the open watch and any pending retry; run() then returns. */
  stop(): void {
    this.stopped = true;
    this.stopSignal.abort();
    this.session?.abort();
  }

  /** List, then watch and resume, until stop(). Never throws. */
  async run(): Promise<void> {
    let needList = true;
    while (!this.stopped) {
      if (needList) {
        if (!(await this.listOrPause())) continue;
        needList = false;
      }
      const outcome = await this.watchOnce();
      if (this.stopped) break;
      needList = await this.afterWatch(outcome);
    }
  }

  /** One complete LIST into the sink; true if it worked, else false after the backoff. */
  private async listOrPause(): Promise<boolean> {
    try {
      await this.relist();
      this.attempt = 0;
      return true;
    } catch (err) {
      this.opts.stats.errors++;
      this.opts.log.warn("list failed; retrying", { error: apiFailure(err) });
      await this.pause();
      return false;
    }
  }

  /** What follows a watch that ended: true to re-list; a pause first where one is due. */
  private async afterWatch(outcome: WatchOutcome): Promise<boolean> {
    const { stats, log } = this.opts;
    if (outcome.kind === "gone") {
      stats.relists++;
      log.info("watch history expired (410); re-listing", { resourceVersion: this.rv });
      return true;
    }
    if (outcome.kind === "error") {
      stats.errors++;
      log.warn("watch failed; resuming", { error: apiFailure(outcome.err), resourceVersion: this.rv });
      if (outcome.healthy) this.attempt = 0; // a watch that worked for a while starts the backoff afresh
      await this.pause();
    } else if (outcome.idle) {
      await this.pause(); // closed at once with nothing delivered: do not spin against the server
    } else {
      this.attempt = 0;
    }
    return false;
  }

  private async pause(): Promise<void> {
    this.attempt += 1;
    const ms = backoffDelay(this.attempt, this.opts.config.backoff ?? { baseMs: 200, maxMs: 30_000 });
    try {
      await sleep(ms, undefined, { signal: this.stopSignal.signal });
    } catch {
      // aborted by stop(): the loop checks `stopped` next
    }
  }

  private async relist(): Promise<void> {
    const { config, stats, log } = this.opts;
    const paged = {
      listFn: this.opts.listFn,
      pageSize: config.pageSize,
      labelSelector: config.labelSelector,
      fieldSelector: config.fieldSelector,
      transform: this.opts.transform,
      stats,
      log,
      onVersionRefused: () => {
        this.rvUnavailable = true;
      },
    };
    const { items, resourceVersion } = await listAll(
      paged,
      relistResourceVersion(this.rv, this.rvUnavailable),
    );
    this.rvUnavailable = false;
    if (this.stopped) return;
    stats.lists++;
    this.rv = resourceVersion;
    this.opts.sink.replace(items);
  }

  private watchOnce(): Promise<WatchOutcome> {
    const { watch, path, config, stats, log } = this.opts;
    const query = watchQuery(this.rv, config);
    stats.watches++;
    this.session = new WatchSession({
      watch,
      path,
      query,
      log,
      stats,
      onEvent: (type, raw) => this.applyEvent(type, raw),
      isStopped: () => this.stopped,
    });
    return this.session.outcome;
  }

  /** The store changes before the version moves on: a resumed watch never skips an event. */
  private applyEvent(type: string, raw: unknown): void {
    const rv = (raw as KubernetesObject)?.metadata?.resourceVersion;
    // A bookmark carries no object, only a newer version to resume from.
    if (type !== "BOOKMARK") this.opts.sink.event(type, this.opts.transform(this.opts.decode(raw)));
    if (rv) this.rv = rv;
  }
}
