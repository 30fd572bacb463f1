/**
 * A list-watch cache (informer) over the agent's watch and list calls (kube-watch.ts, kube-apis.ts), built as
 * client-go's is: a reflector (reflector.ts) lists and watches and feeds a store
 * (informer-store.ts), whose deltas go to the handlers (informer-handlers.ts).
 * - LIST in pages (`limit` + `continue`); a continue token that expired (410) restarts the
 *   list without pagination, as client-go's pager does (list-pager.ts);
 * - the first LIST asks for `resourceVersion=0`, so the API server answers from its watch cache
 *   instead of a consistent read from etcd (a thousand nodes starting at once must not each
 *   read the whole collection from etcd); later re-lists ask for the last resourceVersion seen
 *   (never older than what the handlers saw); only when that is gone (410) or ahead of a lagging
 *   server does a re-list read from etcd. The same choice as client-go's reflector;
 * - WATCH from the list's resourceVersion with bookmarks; a dropped or timed-out stream
 *   resumes from the last resourceVersion seen (event or bookmark) (watch-session.ts);
 * - `410 Gone` (an ERROR event or an HTTP 410) → full re-list, diffed against the cache so
 *   handlers see exactly the adds, updates and deletes that were missed;
 * - errors retry with capped, jittered backoff; handler errors are logged, never thrown.
 * client-node's own makeInformer does not paginate, hence this module.
 */
import type { KubernetesObject } from "@kubernetes/client-node";
import { createLogger, type Logger } from "../log.ts";
import { deliver, type InformerHandlers } from "./informer-handlers.ts";
import { InformerStore } from "./informer-store.ts";
import type { CoreApi, CustomApi } from "./kube-apis.ts";
import type { WatchApi } from "./kube-watch.ts";
import { type InformerStats, Reflector } from "./reflector.ts";
import { collectionPath, type ListFn, type ResourceRef, resourceLister } from "./resource-lister.ts";

// Moved beside their units; still exported from here for the modules that import them.
export type { InformerHandlers } from "./informer-handlers.ts";
export type { InformerStats } from "./reflector.ts";
export {
  collectionPath,
  type ListFn,
  type ListPage,
  type ListParams,
  type ResourceRef,
  resourceLister,
} from "./resource-lister.ts";

export interface InformerOptions<T> {
  resource: ResourceRef;
  clients: { core: CoreApi; custom: CustomApi; watch: WatchApi };
  labelSelector?: string;
  fieldSelector?: string;
  /** Items per LIST page; default 500 (client-go's default). */
  pageSize?: number;
  /** Backoff on errors: first delay and cap, in ms; default 200 ms … 30 s. */
  backoff?: { baseMs: number; maxMs: number };
  /** Server-side watch timeout; each watch asks for this to 2× this (spread reconnects). Default 300 s. */
  watchTimeoutSeconds?: number;
  handlers?: InformerHandlers<T>;
  logger?: Logger;
  /** Override the list call (default: chosen from `resource`). */
  list?: ListFn<T>;
  /** Turn a raw watch object into T (default: client-node's model for core kinds, as-is for others). */
  decode?: (raw: unknown) => T;
  /**
   * Applied to every object (list items page by page, watch objects) before it is cached or
   * handed to a handler, as client-go's SetTransform: keeping only the fields a controller uses
   * makes the cache's memory a small per-object cost, not the objects' size. The result must
   * keep `metadata.name`, `namespace` and `resourceVersion` (the cache's key and diff).
   */
  transform?: (obj: T) => T;
}

export class Informer<T extends KubernetesObject> {
  readonly stats: InformerStats = { lists: 0, listPages: 0, watches: 0, relists: 0, errors: 0, events: 0 };
  /** Resolves after the first complete LIST has been delivered to the handlers. */
  readonly whenSynced: Promise<void>;
  private readonly store = new InformerStore<T>();
  private readonly reflector: Reflector<T>;
  private readonly opts: InformerOptions<T>;
  private readonly log: Logger;
  private synced = false;
  private running: Promise<void> | undefined;
  private resolveSynced: () => void = () => {};

  constructor(options: InformerOptions<T>) {
    this.opts = options;
    const lister = options.list ? undefined : resourceLister<T>(options.clients, options.resource);
    const path = collectionPath(options.resource);
    this.log = (options.logger ?? createLogger()).child({ informer: path });
    this.whenSynced = new Promise((resolve) => {
      this.resolveSynced = resolve;
    });
    this.reflector = new Reflector<T>({
      path,
      watch: options.clients.watch,
      listFn: options.list ?? (lister as { list: ListFn<T> }).list,
      decode: options.decode ?? lister?.decode ?? ((raw) => raw as T),
      transform: options.transform ?? ((obj) => obj),
      config: options,
      stats: this.stats,
      log: this.log,
      sink: { replace: (items) => this.replace(items), event: (type, obj) => this.applyEvent(type, obj) },
    });
  }

  /** Starts listing and watching; resolves once the cache holds the first complete list. */
  start(): Promise<void> {
    this.running ??= this.reflector.run();
    return this.whenSynced;
  }

  /** Stops the watch; pending retries end. Resolves when the loop has exited. */
  async stop(): Promise<void> {
    this.reflector.stop();
    await this.running;
  }

  hasSynced(): boolean {
    return this.synced;
  }

  get(name: string, namespace?: string): T | undefined {
    return this.store.get(name, namespace);
  }

  list(namespace?: string): T[] {
    return this.store.list(namespace);
  }

  /** The last resourceVersion seen (from a list, an event or a bookmark). */
  resourceVersion(): string {
    return this.reflector.resourceVersion();
  }

  /** A complete LIST: the cache takes it whole, handlers hear what changed since the last. */
  private replace(items: T[]): void {
    for (const delta of this.store.replace(items)) deliver(this.opts.handlers, delta, this.log);
    if (!this.synced) {
      this.synced = true;
      this.resolveSynced();
    }
  }

  private applyEvent(type: string, obj: T): void {
    const delta = this.store.apply(type, obj);
    if (delta) deliver(this.opts.handlers, delta, this.log);
  }
}

export function createInformer<T extends KubernetesObject>(options: InformerOptions<T>): Informer<T> {
  return new Informer<T>(options);
}
