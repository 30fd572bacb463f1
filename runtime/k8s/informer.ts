/**
 * A list-watch cache (informer) over @kubernetes/client-node's Watch and list calls:
 * - LIST in pages (`limit` + `continue`); a continue token that expired (410) restarts the
 *   list without pagination, as client-go's pager does;
 * - the first LIST asks for `resourceVersion=0`, so the API server answers from its watch cache
 *   instead of a consistent read from etcd (a thousand nodes starting at once must not each
 *   read the whole collection from etcd); later re-lists ask for the last resourceVersion seen
 *   (never older than what the handlers saw); only when that is gone (410) or ahead of a lagging
 *   server does a re-list read from etcd. The same choice as client-go's reflector;
 * - WATCH from the list's resourceVersion with bookmarks; a dropped or timed-out stream
 *   resumes from the last resourceVersion seen (event or bookmark);
 * - `410 Gone` (an ERROR event or an HTTP 410) → full re-list, diffed against the cache so
 *   handlers see exactly the adds, updates and deletes that were missed;
 * - errors retry with capped, jittered backoff; handler errors are logged, never thrown.
 * client-node's own makeInformer does not paginate, hence this module.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { CoreV1Api, CustomObjectsApi, KubernetesObject, Watch } from "@kubernetes/client-node";
import { ObjectSerializer } from "@kubernetes/client-node/dist/gen/models/ObjectSerializer.js";
import { backoffDelay } from "../backoff.ts";
import { createLogger, type Logger } from "../log.ts";
import { apiFailure, isGone, isTooLargeResourceVersion } from "./api-errors.ts";
import { objectKey } from "./object-key.ts";

/** Which collection to watch: group "" is the core API. Without namespace: all namespaces. */
export interface ResourceRef {
  group: string;
  version: string;
  plural: string;
  namespace?: string;
}

export interface ListParams {
  /** "0": any version (the watch cache); a version: not older than it; absent: a consistent read. */
  resourceVersion?: string;
  limit?: number;
  continueToken?: string;
  labelSelector?: string;
  fieldSelector?: string;
}

export interface ListPage<T> {
  items: T[];
  metadata?: { resourceVersion?: string; continue?: string; _continue?: string };
}

export type ListFn<T> = (params: ListParams) => Promise<ListPage<T>>;

export interface InformerHandlers<T> {
  add?: (obj: T) => void | Promise<void>;
  update?: (obj: T, old: T) => void | Promise<void>;
  delete?: (obj: T) => void | Promise<void>;
}

export interface InformerOptions<T> {
  resource: ResourceRef;
  clients: { core: CoreV1Api; custom: CustomObjectsApi; watch: Watch };
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

const CORE_MODELS: Record<string, { type: string; kind: string }> = {
  pods: { type: "V1Pod", kind: "Pod" },
  namespaces: { type: "V1Namespace", kind: "Namespace" },
  nodes: { type: "V1Node", kind: "Node" },
  events: { type: "CoreV1Event", kind: "Event" },
  secrets: { type: "V1Secret", kind: "Secret" },
  configmaps: { type: "V1ConfigMap", kind: "ConfigMap" },
};

export function collectionPath(ref: ResourceRef): string {
  const base = ref.group === "" ? `/api/${ref.version}` : `/apis/${ref.group}/${ref.version}`;
  return ref.namespace ? `${base}/namespaces/${ref.namespace}/${ref.plural}` : `${base}/${ref.plural}`;
}

/** The list call and watch-object decoder for a resource. */
export function resourceLister<T>(
  clients: { core: CoreV1Api; custom: CustomObjectsApi },
  ref: ResourceRef,
): { list: ListFn<T>; decode: (raw: unknown) => T } {
  if (ref.group !== "") {
    const list: ListFn<T> = (p) => {
      const q = {
        group: ref.group,
        version: ref.version,
        plural: ref.plural,
        ...(p.resourceVersion !== undefined ? { resourceVersion: p.resourceVersion } : {}),
        ...(p.limit ? { limit: p.limit } : {}),
        ...(p.continueToken ? { _continue: p.continueToken } : {}),
        ...(p.labelSelector ? { labelSelector: p.labelSelector } : {}),
        ...(p.fieldSelector ? { fieldSelector: p.fieldSelector } : {}),
      };
      return ref.namespace
        ? clients.custom.listNamespacedCustomObject({ ...q, namespace: ref.namespace })
        : clients.custom.listClusterCustomObject(q);
    };
    return { list, decode: (raw) => raw as T };
  }
  const model = CORE_MODELS[ref.plural];
  if (!model) throw new Error(`no core list call for "${ref.plural}"; pass options.list`);
  const core = clients.core;
  const list: ListFn<T> = async (p) => {
    const q = {
      ...(p.resourceVersion !== undefined ? { resourceVersion: p.resourceVersion } : {}),
      ...(p.limit ? { limit: p.limit } : {}),
      ...(p.continueToken ? { _continue: p.continueToken } : {}),
      ...(p.labelSelector ? { labelSelector: p.labelSelector } : {}),
      ...(p.fieldSelector ? { fieldSelector: p.fieldSelector } : {}),
    };
    const ns = ref.namespace;
    let page: { items: unknown[]; metadata?: { resourceVersion?: string; _continue?: string } };
    switch (ref.plural) {
      case "pods":
        page = ns
          ? await core.listNamespacedPod({ ...q, namespace: ns })
          : await core.listPodForAllNamespaces(q);
        break;
      case "namespaces":
        page = await core.listNamespace(q);
        break;
      case "nodes":
        page = await core.listNode(q);
        break;
      case "events":
        page = ns
          ? await core.listNamespacedEvent({ ...q, namespace: ns })
          : await core.listEventForAllNamespaces(q);
        break;
      case "secrets":
        page = ns
          ? await core.listNamespacedSecret({ ...q, namespace: ns })
          : await core.listSecretForAllNamespaces(q);
        break;
      default:
        page = ns
          ? await core.listNamespacedConfigMap({ ...q, namespace: ns })
          : await core.listConfigMapForAllNamespaces(q);
    }
    // kube-apiserver leaves kind/apiVersion off list items; watch objects carry them. Make them agree.
    for (const item of page.items as KubernetesObject[]) {
      item.kind ??= model.kind;
      item.apiVersion ??= ref.version;
    }
    return page as ListPage<T>;
  };
  // Watch hands over raw JSON; decode it into the same model classes the typed list returns.
  const decode = (raw: unknown) => ObjectSerializer.deserialize(raw, model.type, "") as T;
  return { list, decode };
}

type WatchOutcome =
  | { kind: "gone" }
  | { kind: "error"; err: unknown; healthy: boolean }
  | { kind: "closed"; idle: boolean };

/** A watch that ends sooner than this having delivered nothing counts as a failure (no hot loop). */
const MIN_HEALTHY_WATCH_MS = 1000;

export class Informer<T extends KubernetesObject> {
  readonly stats: InformerStats = { lists: 0, listPages: 0, watches: 0, relists: 0, errors: 0, events: 0 };
  private cache = new Map<string, T>();
  private rv = "";
  /** The last list's version is gone or ahead of the server: the next LIST is a consistent read. */
  private rvUnavailable = false;
  private synced = false;
  private stopped = false;
  private running: Promise<void> | undefined;
  private attempt = 0;
  private abortWatch: AbortController | undefined;
  private readonly stopSignal = new AbortController();
  private readonly opts: InformerOptions<T>;
  private readonly listFn: ListFn<T>;
  private readonly decode: (raw: unknown) => T;
  private readonly transform: (obj: T) => T;
  private readonly log: Logger;
  private readonly path: string;
  private resolveSynced: () => void = () => {};
  /** Resolves after the first complete LIST has been delivered to the handlers. */
  readonly whenSynced: Promise<void>;

  constructor(options: InformerOptions<T>) {
    this.opts = options;
    const lister = options.list ? undefined : resourceLister<T>(options.clients, options.resource);
    this.listFn = options.list ?? (lister as { list: ListFn<T> }).list;
    this.decode = options.decode ?? lister?.decode ?? ((raw) => raw as T);
    this.transform = options.transform ?? ((obj) => obj);
    this.path = collectionPath(options.resource);
    this.log = (options.logger ?? createLogger()).child({ informer: this.path });
    this.whenSynced = new Promise((resolve) => {
      this.resolveSynced = resolve;
    });
  }

  /** Starts listing and watching; resolves once the cache holds the first complete list. */
  start(): Promise<void> {
    this.running ??= this.run();
    return this.whenSynced;
  }

  /** Stops the watch; pending retries end. Resolves when the loop has exited. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.stopSignal.abort();
    this.abortWatch?.abort();
    await this.running;
  }

  hasSynced(): boolean {
    return this.synced;
  }

  get(name: string, namespace?: string): T | undefined {
    return this.cache.get(`${namespace ?? ""}/${name}`);
  }

  list(namespace?: string): T[] {
    const all = [...this.cache.values()];
    return namespace === undefined ? all : all.filter((o) => o.metadata?.namespace === namespace);
  }

  /** The last resourceVersion seen (from a list, an event or a bookmark). */
  resourceVersion(): string {
    return this.rv;
  }

  private async run(): Promise<void> {
    let needList = true;
    while (!this.stopped) {
      if (needList) {
        try {
          await this.relist();
          needList = false;
          this.attempt = 0;
        } catch (err) {
          this.stats.errors++;
          this.log.warn("list failed; retrying", { error: apiFailure(err) });
          await this.pause();
          continue;
        }
      }
      const outcome = await this.watchOnce();
      if (this.stopped) break;
      if (outcome.kind === "gone") {
        this.stats.relists++;
        this.log.info("watch history expired (410); re-listing", { resourceVersion: this.rv });
        needList = true;
      } else if (outcome.kind === "error") {
        this.stats.errors++;
        this.log.warn("watch failed; resuming", { error: apiFailure(outcome.err), resourceVersion: this.rv });
        if (outcome.healthy) this.attempt = 0; // a watch that worked for a while starts the backoff afresh
        await this.pause();
      } else if (outcome.idle) {
        await this.pause(); // closed at once with nothing delivered: do not spin against the server
      } else {
        this.attempt = 0;
      }
    }
  }

  private async pause(): Promise<void> {
    this.attempt += 1;
    const ms = backoffDelay(this.attempt, this.opts.backoff ?? { baseMs: 200, maxMs: 30_000 });
    try {
      await sleep(ms, undefined, { signal: this.stopSignal.signal });
    } catch {
      // aborted by stop(): the loop checks `stopped` next
    }
  }

  /** What the next LIST asks for (client-go's relistResourceVersion): undefined is a consistent read. */
  private listResourceVersion(): string | undefined {
    if (this.rvUnavailable) return undefined;
    return this.rv === "" ? "0" : this.rv;
  }

  private async listAll(): Promise<{ items: T[]; resourceVersion: string }> {
    const items: T[] = [];
    let limit: number | undefined = this.opts.pageSize ?? 500;
    let continueToken: string | undefined;
    let fromVersion = this.listResourceVersion();
    for (;;) {
      let page: ListPage<T>;
      try {
        const params: ListParams = {};
        // The continue token carries the snapshot's version: the API refuses both together.
        if (!continueToken && fromVersion !== undefined) params.resourceVersion = fromVersion;
        if (limit) params.limit = limit;
        if (continueToken) params.continueToken = continueToken;
        if (this.opts.labelSelector) params.labelSelector = this.opts.labelSelector;
        if (this.opts.fieldSelector) params.fieldSelector = this.opts.fieldSelector;
        this.stats.listPages++;
        page = await this.listFn(params);
      } catch (err) {
        if (continueToken && isGone(err)) {
          // The snapshot behind the token is gone: start over with one unpaginated LIST.
          this.log.info("list continuation expired (410); listing without pagination");
          items.length = 0;
          continueToken = undefined;
          limit = undefined;
          fromVersion = undefined;
          continue;
        }
        if (
          !continueToken &&
          fromVersion !== undefined &&
          fromVersion !== "0" &&
          (isGone(err) || isTooLargeResourceVersion(err))
        ) {
          // The version we saw last is compacted away, or this server lags behind it: read from etcd.
          this.log.info("list from the last resourceVersion refused; listing from storage", {
            resourceVersion: fromVersion,
            error: apiFailure(err),
          });
          this.rvUnavailable = true;
          fromVersion = undefined;
          continue;
        }
        throw err;
      }
      // Page by page: at most one page of whole objects is alive at a time.
      for (const item of page.items) items.push(this.transform(item));
      continueToken = page.metadata?._continue ?? page.metadata?.continue ?? undefined;
      if (!continueToken) {
        this.rvUnavailable = false;
        return { items, resourceVersion: page.metadata?.resourceVersion ?? "" };
      }
    }
  }

  private async relist(): Promise<void> {
    const { items, resourceVersion } = await this.listAll();
    if (this.stopped) return;
    this.stats.lists++;
    const next = new Map<string, T>();
    for (const item of items) next.set(objectKey(item), item);
    const old = this.cache;
    this.cache = next;
    this.rv = resourceVersion;
    for (const [key, obj] of next) {
      const before = old.get(key);
      if (!before) this.dispatch("add", obj);
      else if (before.metadata?.resourceVersion !== obj.metadata?.resourceVersion)
        this.dispatch("update", obj, before);
    }
    for (const [key, obj] of old) if (!next.has(key)) this.dispatch("delete", obj);
    if (!this.synced) {
      this.synced = true;
      this.resolveSynced();
    }
  }

  private watchOnce(): Promise<WatchOutcome> {
    return new Promise<WatchOutcome>((resolve) => {
      let gone = false;
      let delivered = 0;
      let settled = false;
      const startedAt = performance.now();
      const finish = (err: unknown) => {
        if (settled) return;
        settled = true;
        this.abortWatch = undefined;
        if (gone || (err && isGone(err))) resolve({ kind: "gone" });
        else if (err && !isBenignEnd(err)) {
          resolve({
            kind: "error",
            err,
            healthy: delivered > 0 || performance.now() - startedAt >= MIN_HEALTHY_WATCH_MS,
          });
        }
        // A watch that ran its course (server timeout, client inactivity timeout, quiet resource)
        // resumes at once; only one that ends immediately with nothing to show is paced.
        else
          resolve({
            kind: "closed",
            idle: delivered === 0 && performance.now() - startedAt < MIN_HEALTHY_WATCH_MS,
          });
      };
      const base = this.opts.watchTimeoutSeconds ?? 300;
      const query: Record<string, string | number | boolean> = {
        allowWatchBookmarks: true,
        resourceVersion: this.rv,
        timeoutSeconds: Math.floor(base * (1 + Math.random())),
      };
      if (this.opts.labelSelector) query.labelSelector = this.opts.labelSelector;
      if (this.opts.fieldSelector) query.fieldSelector = this.opts.fieldSelector;
      this.stats.watches++;
      const onEvent = (type: string, raw: unknown) => {
        try {
          this.stats.events++;
          if (type !== "ERROR" && type !== "BOOKMARK") delivered++;
          if (type === "ERROR") {
            if (apiFailure(raw).code === 410) gone = true;
            else this.log.warn("watch ERROR event", { status: raw });
            this.abortWatch?.abort();
            finish(gone ? undefined : raw);
            return;
          }
          const rv = (raw as KubernetesObject)?.metadata?.resourceVersion;
          if (type === "BOOKMARK") {
            if (rv) this.rv = rv;
            return;
          }
          const obj = this.transform(this.decode(raw));
          const key = objectKey(obj);
          const before = this.cache.get(key);
          if (type === "DELETED") {
            this.cache.delete(key);
            this.dispatch("delete", obj);
          } else if (type === "ADDED" || type === "MODIFIED") {
            this.cache.set(key, obj);
            if (before) this.dispatch("update", obj, before);
            else this.dispatch("add", obj);
          }
          if (rv) this.rv = rv;
        } catch (err) {
          this.log.error("could not process a watch event", { type, error: err });
        }
      };
      this.opts.clients.watch.watch(this.path, query, onEvent, finish).then(
        (controller) => {
          if (settled) return;
          this.abortWatch = controller;
          if (this.stopped) controller.abort();
        },
        (err: unknown) => finish(err),
      );
    });
  }

  private dispatch(kind: "add" | "delete", obj: T): void;
  private dispatch(kind: "update", obj: T, old: T): void;
  private dispatch(kind: "add" | "update" | "delete", obj: T, old?: T): void {
    const h = this.opts.handlers;
    const fn = kind === "add" ? h?.add : kind === "delete" ? h?.delete : undefined;
    try {
      const result = kind === "update" ? h?.update?.(obj, old as T) : fn?.(obj);
      if (result && typeof (result as Promise<void>).catch === "function") {
        (result as Promise<void>).catch((err: unknown) =>
          this.log.error(`${kind} handler failed`, { object: objectKey(obj), error: err }),
        );
      }
    } catch (err) {
      this.log.error(`${kind} handler failed`, { object: objectKey(obj), error: err });
    }
  }
}

/** A watch that ended because the stream closed or timed out is resumed, not counted as a failure. */
function isBenignEnd(err: unknown): boolean {
  const name = (err as { name?: string })?.name;
  return name === "TimeoutError" || name === "AbortError";
}

export function createInformer<T extends KubernetesObject>(options: InformerOptions<T>): Informer<T> {
  return new Informer<T>(options);
}
