/**
 * The stand-in's storage: objects per resource, a cluster-wide resourceVersion counter
 * (like etcd's revision), a bounded event history for watches, consistent list snapshots
 * for `continue`, finalizers, namespace termination and ownerReference garbage collection.
 * Every method either returns a result or throws an ApiError carrying a Kubernetes Status.
 * Stored objects are never mutated in place: a write replaces the object, so list
 * snapshots and history can share references.
 */
import { randomUUID } from "node:crypto";
import { parse as parseCel } from "@marcbachmann/cel-js";
import { Ajv, type ValidateFunction } from "ajv";
import { applyPatch } from "./patch.ts";
import {
  apiVersionOf,
  BUILTIN_RESOURCES,
  defFromCrd,
  HIVE_RESOURCES,
  type ResourceDef,
  resourceKey,
} from "./resources.ts";
import {
  type FieldRequirement,
  type LabelSelector,
  matchesFields,
  matchesLabels,
  parseFieldSelector,
  parseLabelSelector,
} from "./selectors.ts";
import { ApiError, errors } from "./status.ts";
import { celFailures, pruneObject } from "./structural.ts";

export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  deletionGracePeriodSeconds?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  ownerReferences?: {
    apiVersion?: string;
    kind?: string;
    name?: string;
    uid?: string;
    controller?: boolean;
    blockOwnerDeletion?: boolean;
  }[];
  [k: string]: unknown;
}

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  [k: string]: unknown;
}

export type EventType = "ADDED" | "MODIFIED" | "DELETED";

export interface WatchEvent {
  type: EventType | "BOOKMARK" | "ERROR";
  object: unknown;
}

interface HistoryEntry {
  rv: number;
  res: string;
  type: EventType;
  object: KubeObject;
  prev?: KubeObject;
}

interface ResourceState {
  def: ResourceDef;
  objects: Map<string, KubeObject>;
  validate?: ValidateFunction;
}

interface Snapshot {
  rv: number;
  items: KubeObject[];
  createdAt: number;
}

export interface ListQuery {
  labelSelector?: string | null;
  fieldSelector?: string | null;
  limit?: number;
  continue?: string | null;
  /**
   * As kube-apiserver reads it: absent or "" is a consistent read (served from storage); "0" is
   * any version (served from the watch cache); another value with `limit` and no
   * `resourceVersionMatch` is an exact read (410 Expired once compacted), otherwise not older than it.
   */
  resourceVersion?: string | null;
  resourceVersionMatch?: string | null;
}

export interface ListResult {
  apiVersion: string;
  kind: string;
  metadata: { resourceVersion: string; continue?: string; remainingItemCount?: number };
  items: KubeObject[];
}

export interface DeleteOptions {
  propagationPolicy?: "Orphan" | "Background" | "Foreground";
  preconditions?: { uid?: string; resourceVersion?: string };
  /** 0 forces immediate removal of a terminating pod (kubectl delete --grace-period=0 --force). */
  gracePeriodSeconds?: number;
}

export interface Watcher {
  readonly def: ResourceDef;
  close(): void;
}

/** Admission of one change: throws an ApiError to refuse it. `object` is null on removal, `oldObject` on creation. */
export type Admit = (object: KubeObject | null, oldObject: KubeObject | null) => void;

export interface StoreOptions {
  /** Watch events retained; a watch from an older resourceVersion gets 410 Expired. Default 50,000. */
  historyLimit?: number;
  /** How long a paginated list's snapshot (its `continue` token) stays valid. Default 5 minutes. */
  continueTtlMs?: number;
  /** Delay before the garbage collector acts on a removal. Default 0 (next tick). */
  gcDelayMs?: number;
  /**
   * Simulate the kubelet's graceful termination: deleting a pod bound to a node sets
   * deletionTimestamp (MODIFIED) and the pod goes away this many ms later (or when its last
   * finalizer goes, if later). Default: undefined, pods are removed at once.
   */
  podTerminationMs?: number;
  /** Register Hive's kinds up front without schemas (the server installs the real CRDs instead). Default false. */
  hiveResources?: boolean;
}

const FOREGROUND = "foregroundDeletion";
const MAX_SNAPSHOTS = 256;
const NAMESPACE_FINALIZER = "kubernetes";
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const LABEL_KEY =
  /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$/;
/** metav1.MicroTime is parsed with RFC3339Micro: exactly six fractional digits. */
const MICRO_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d\d:\d\d)$/;
const GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789";

function keyOf(namespace: string | undefined, name: string): string {
  return `${namespace ?? ""}/${name}`;
}

function now(): string {
  return `${new Date().toISOString().slice(0, 19)}Z`;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

/** JSON equality with object keys compared regardless of order. */
function equalJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) {
    return Array.isArray(b) && a.length === b.length && a.every((x, i) => equalJson(x, b[i]));
  }
  if (isObject(a) && isObject(b)) {
    const ka = Object.keys(a).filter((k) => a[k] !== undefined);
    const kb = Object.keys(b).filter((k) => b[k] !== undefined);
    return ka.length === kb.length && ka.every((k) => equalJson(a[k], b[k]));
  }
  return false;
}

function without(obj: KubeObject, ...fields: string[]): Record<string, unknown> {
  const out: Record<string, unknown> = { ...obj };
  for (const f of fields) delete out[f];
  return out;
}

export class Store {
  private rv = 1;
  private compactedRv = 0;
  private readonly resources = new Map<string, ResourceState>();
  private history: HistoryEntry[] = [];
  private readonly watchers = new Set<WatcherImpl>();
  private readonly uids = new Map<string, { res: string; key: string }>();
  private readonly snapshots = new Map<string, Snapshot>();
  private readonly historyLimit: number;
  private readonly continueTtlMs: number;
  private readonly gcDelayMs: number;
  private readonly podTerminationMs: number | undefined;
  /** Pods in graceful termination (uid → kubelet timer): not removed before the timer fires. */
  private readonly terminatingPods = new Map<string, NodeJS.Timeout>();
  private gcTimer: NodeJS.Timeout | undefined;
  /** ownerReference uid → ids ("resource\0namespace/name") of the objects that name it. */
  private readonly dependentsIndex = new Map<string, Set<string>>();
  /** Objects whose owners may all be gone. */
  private readonly gcCandidates = new Set<string>();
  /** Objects being deleted in the foreground (waiting for their dependents). */
  private readonly foreground = new Set<string>();
  /** Namespaces being deleted. */
  private readonly terminating = new Set<string>();
  private readonly ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
  /** The request being admitted (admitted()). */
  private admission: { res: string; admit: Admit } | undefined;

  constructor(options: StoreOptions = {}) {
    this.historyLimit = options.historyLimit ?? 50_000;
    this.continueTtlMs = options.continueTtlMs ?? 5 * 60_000;
    this.gcDelayMs = options.gcDelayMs ?? 0;
    this.podTerminationMs = options.podTerminationMs;
    for (const def of BUILTIN_RESOURCES) this.register(def);
    if (options.hiveResources ?? false) for (const def of HIVE_RESOURCES) this.register(def);
    for (const ns of ["default", "kube-system", "kube-public", "kube-node-lease"]) {
      this.create(this.mustDef("", "namespaces"), undefined, { metadata: { name: ns } });
    }
  }

  // ---- resources -------------------------------------------------------------------------

  register(def: ResourceDef): void {
    const key = resourceKey(def.group, def.plural);
    const existing = this.resources.get(key);
    const state: ResourceState = { def, objects: existing?.objects ?? new Map() };
    if (def.schema !== undefined)
      state.validate = this.ajv.compile(stripKubernetesKeywords(def.schema) as object);
    this.resources.set(key, state);
  }

  /** The resource served at group/version/plural, if any. */
  lookup(group: string, version: string, plural: string): ResourceDef | undefined {
    const state = this.resources.get(resourceKey(group, plural));
    if (!state || state.def.version !== version) return undefined;
    return state.def;
  }

  definitions(): ResourceDef[] {
    return [...this.resources.values()].map((s) => s.def);
  }

  private mustDef(group: string, plural: string): ResourceDef {
    const state = this.resources.get(resourceKey(group, plural));
    if (!state) throw new Error(`resource ${plural}.${group} is not registered`);
    return state.def;
  }

  private state(def: ResourceDef): ResourceState {
    const state = this.resources.get(resourceKey(def.group, def.plural));
    if (!state) throw errors.notFoundPath(`${def.plural}.${def.group}`);
    return state;
  }

  currentResourceVersion(): string {
    return String(this.rv);
  }

  /** Forget all watch history: watches and `continue` tokens from before now get 410 Expired. */
  compact(): void {
    this.compactedRv = this.rv;
    this.history = [];
    for (const [id, snap] of this.snapshots) if (snap.rv < this.compactedRv) this.snapshots.delete(id);
  }

  // ---- reads -----------------------------------------------------------------------------

  get(def: ResourceDef, namespace: string | undefined, name: string): KubeObject {
    const obj = this.state(def).objects.get(keyOf(def.namespaced ? namespace : undefined, name));
    if (!obj) throw errors.notFound(def, name);
    return obj;
  }

  /** The stored objects of group/plural (in `namespace` when given); none when it is not served. */
  stored(group: string, plural: string, namespace?: string): KubeObject[] {
    const state = this.resources.get(resourceKey(group, plural));
    if (!state) return [];
    const all = [...state.objects.values()];
    return namespace === undefined ? all : all.filter((o) => o.metadata.namespace === namespace);
  }

  /**
   * Runs `write` (one request's store call) with admission: the first change it commits to
   * `def`'s objects is shown to `admit` first (object and old object, as admission sees them),
   * and is not made when `admit` throws. Changes the write causes elsewhere (garbage
   * collection, a namespace's contents) are not admitted, as upstream admits only the request.
   */
  admitted<T>(def: ResourceDef, admit: Admit, write: () => T): T {
    const previous = this.admission;
    this.admission = { res: resourceKey(def.group, def.plural), admit };
    try {
      return write();
    } finally {
      this.admission = previous;
    }
  }

  /** All stored objects of a resource (tests' back door for assertions; do not mutate). */
  all(def: ResourceDef): KubeObject[] {
    return [...this.state(def).objects.values()];
  }

  list(def: ResourceDef, namespace: string | undefined, query: ListQuery): ListResult {
    let snap: Snapshot;
    let offset = 0;
    let id: string | undefined;
    const rv = query.resourceVersion ?? "";
    if (query.continue && rv !== "") {
      throw errors.badRequest("specifying resource version is not allowed when using continue");
    }
    if (rv !== "" && !/^\d+$/.test(rv)) throw errors.badRequest(`invalid resource version: ${rv}`);
    if (query.resourceVersionMatch && rv === "") {
      throw errors.badRequest("resourceVersionMatch is forbidden unless resourceVersion is provided");
    }
    if (rv !== "" && rv !== "0") {
      const exact = query.resourceVersionMatch === "Exact" || (!query.resourceVersionMatch && query.limit);
      // The stand-in keeps no history: an exact read of a version still in it is served from the present.
      if (exact && Number(rv) < this.compactedRv) {
        throw errors.expired(`too old resource version: ${rv} (${this.compactedRv})`);
      }
      if (Number(rv) > this.rv) throw errors.tooLargeResourceVersion(rv, this.rv);
    }
    if (query.continue) {
      const token = decodeContinue(query.continue);
      const found = token ? this.snapshots.get(token.id) : undefined;
      if (
        !token ||
        !found ||
        found.rv < this.compactedRv ||
        Date.now() - found.createdAt > this.continueTtlMs
      ) {
        if (token) this.snapshots.delete(token.id);
        throw errors.expired(
          "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
        );
      }
      snap = found;
      offset = token.offset;
      id = token.id;
    } else {
      const labels = parseLabelSelector(query.labelSelector);
      const fields = parseFieldSelector(query.fieldSelector, supportedFields(def));
      const matched: [string, KubeObject][] = [];
      for (const [key, obj] of this.state(def).objects) {
        if (def.namespaced && namespace !== undefined && !key.startsWith(`${namespace}/`)) continue;
        if (matches(obj, def, namespace, labels, fields)) matched.push([key, obj]);
      }
      // etcd returns keys in order: namespace/name.
      matched.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
      const items = matched.map((m) => m[1]);
      snap = { rv: this.rv, items, createdAt: Date.now() };
    }
    const limit = query.limit && query.limit > 0 ? query.limit : Number.POSITIVE_INFINITY;
    const page = snap.items.slice(offset, offset + limit);
    const metadata: ListResult["metadata"] = { resourceVersion: String(snap.rv) };
    const next = offset + page.length;
    if (next < snap.items.length) {
      if (id === undefined) {
        id = randomUUID();
        this.snapshots.set(id, snap);
        // Tokens stay valid (and retryable) until they expire; bound the memory they hold.
        if (this.snapshots.size > MAX_SNAPSHOTS) {
          const oldest = this.snapshots.keys().next().value;
          if (oldest !== undefined) this.snapshots.delete(oldest);
        }
      }
      metadata.continue = encodeContinue({ id, offset: next, rv: snap.rv });
      metadata.remainingItemCount = snap.items.length - next;
    }
    const builtin = isBuiltin(def);
    return {
      apiVersion: apiVersionOf(def),
      kind: def.listKind,
      metadata,
      // kube-apiserver omits kind/apiVersion on the items of built-in lists; custom resources keep them.
      items: builtin ? page.map((o) => without(o, "kind", "apiVersion") as KubeObject) : page,
    };
  }

  // ---- writes ----------------------------------------------------------------------------

  create(def: ResourceDef, namespace: string | undefined, body: unknown): KubeObject {
    const state = this.state(def);
    if (!isObject(body)) throw errors.badRequest("the body of the request must be a JSON object");
    const obj = structuredClone(body) as KubeObject;
    this.checkTypeMeta(def, obj);
    const meta: ObjectMeta = isObject(obj.metadata) ? { ...obj.metadata } : {};
    if (def.namespaced) {
      if (meta.namespace && namespace && meta.namespace !== namespace) {
        throw errors.badRequest(
          "the namespace of the provided object does not match the namespace sent on the request",
        );
      }
      meta.namespace = namespace ?? meta.namespace;
      if (!meta.namespace)
        throw errors.badRequest("the server could not find the requested resource: a namespace is required");
      this.checkNamespaceWritable(def, meta.namespace, meta.name ?? meta.generateName ?? "");
    } else delete meta.namespace;
    if (!meta.name && meta.generateName) {
      let name: string;
      do {
        name =
          meta.generateName +
          Array.from(
            { length: 5 },
            () => GENERATE_ALPHABET[Math.floor(Math.random() * GENERATE_ALPHABET.length)],
          ).join("");
      } while (state.objects.has(keyOf(meta.namespace, name)));
      meta.name = name;
    }
    const name = meta.name ?? "";
    this.checkMeta(def, meta, name);
    if (state.objects.has(keyOf(meta.namespace, name))) throw errors.alreadyExists(def, name);
    delete meta.deletionTimestamp;
    delete meta.deletionGracePeriodSeconds;
    delete meta.managedFields;
    meta.uid = randomUUID();
    meta.generation = 1;
    meta.creationTimestamp = now();
    obj.metadata = meta;
    obj.apiVersion = apiVersionOf(def);
    obj.kind = def.kind;
    this.prepareForCreate(def, obj);
    this.prune(state, obj);
    this.validate(state, obj);
    this.commit(state, "ADDED", obj);
    if (def.group === "apiextensions.k8s.io" && def.plural === "customresourcedefinitions")
      this.registerCrd(obj);
    return obj;
  }

  /**
   * PUT. With `subresource: "status"` only status changes; on the main endpoint of a kind with a
   * status subresource, status changes are ignored.
   */
  update(
    def: ResourceDef,
    namespace: string | undefined,
    name: string,
    body: unknown,
    subresource?: "status",
  ): KubeObject {
    const state = this.state(def);
    const existing = this.get(def, namespace, name);
    if (!isObject(body)) throw errors.badRequest("the body of the request must be a JSON object");
    const incoming = structuredClone(body) as KubeObject;
    this.checkTypeMeta(def, incoming);
    const inMeta: ObjectMeta = isObject(incoming.metadata) ? incoming.metadata : {};
    if (inMeta.name !== undefined && inMeta.name !== name) {
      throw errors.badRequest(
        `the name of the object (${inMeta.name}) does not match the name on the URL (${name})`,
      );
    }
    if (def.namespaced && inMeta.namespace && inMeta.namespace !== existing.metadata.namespace) {
      throw errors.badRequest(
        "the namespace of the provided object does not match the namespace sent on the request",
      );
    }
    if (inMeta.resourceVersion && inMeta.resourceVersion !== existing.metadata.resourceVersion) {
      throw errors.conflict(def, name);
    }
    if (inMeta.uid && inMeta.uid !== existing.metadata.uid) {
      throw errors.conflict(
        def,
        name,
        `Precondition failed: UID in precondition: ${inMeta.uid}, UID in object meta: ${existing.metadata.uid}`,
      );
    }
    let next: KubeObject;
    if (subresource === "status") {
      next = { ...existing, metadata: { ...existing.metadata } };
      if (incoming.status === undefined) delete next.status;
      else next.status = incoming.status;
    } else {
      const meta: ObjectMeta = { ...inMeta };
      for (const f of [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "namespace",
        "name",
      ] as const) {
        if (existing.metadata[f] === undefined) delete meta[f];
        else meta[f] = existing.metadata[f] as never;
      }
      this.checkMeta(def, meta, name);
      next = { ...incoming, metadata: meta, apiVersion: apiVersionOf(def), kind: def.kind };
      if (def.statusSubresource) {
        if (existing.status === undefined) delete next.status;
        else next.status = existing.status;
      }
      this.checkUpdate(def, existing, next);
    }
    next.metadata.resourceVersion = existing.metadata.resourceVersion;
    this.prune(state, next);
    if (equalJson(next, existing)) return existing; // a no-op write is not stored: no new resourceVersion, no event
    const ignored = def.statusSubresource ? ["metadata", "status"] : ["metadata"];
    if (!equalJson(without(next, ...ignored), without(existing, ...ignored))) {
      next.metadata.generation = (existing.metadata.generation ?? 1) + 1;
    }
    this.validate(state, next);
    if (
      next.metadata.deletionTimestamp &&
      (next.metadata.finalizers ?? []).length === 0 &&
      !this.isHeldNamespace(def, next) &&
      !this.terminatingPods.has(next.metadata.uid ?? "")
    ) {
      return this.remove(state, next);
    }
    this.commit(state, "MODIFIED", next, existing);
    return next;
  }

  patch(
    def: ResourceDef,
    namespace: string | undefined,
    name: string,
    contentType: string,
    patch: unknown,
    subresource?: "status",
  ): KubeObject {
    const existing = this.get(def, namespace, name);
    const patched = applyPatch(contentType, existing, patch);
    if (!isObject(patched)) throw errors.badRequest("the patch produced something that is not an object");
    const meta = isObject(patched.metadata) ? patched.metadata : {};
    // A resourceVersion in a patch is a precondition, as in kube-apiserver.
    if (meta.resourceVersion !== undefined && meta.resourceVersion !== existing.metadata.resourceVersion) {
      throw errors.conflict(def, name);
    }
    return this.update(def, namespace, name, patched, subresource);
  }

  /** Returns the object and whether it is gone (200) or only marked for deletion (202). */
  delete(
    def: ResourceDef,
    namespace: string | undefined,
    name: string,
    options: DeleteOptions = {},
  ): { object: KubeObject; removed: boolean } {
    const state = this.state(def);
    const existing = this.get(def, namespace, name);
    const pre = options.preconditions ?? {};
    if (pre.uid && pre.uid !== existing.metadata.uid) {
      throw errors.conflict(
        def,
        name,
        `Precondition failed: UID in precondition: ${pre.uid}, UID in object meta: ${existing.metadata.uid}`,
      );
    }
    if (pre.resourceVersion && pre.resourceVersion !== existing.metadata.resourceVersion) {
      throw errors.conflict(
        def,
        name,
        `Precondition failed: ResourceVersion in precondition: ${pre.resourceVersion}, ResourceVersion in object meta: ${existing.metadata.resourceVersion}`,
      );
    }
    const uid = existing.metadata.uid ?? "";
    if (this.isPod(def) && this.terminatingPods.has(uid)) {
      if (options.gracePeriodSeconds !== 0) return { object: existing, removed: false };
      this.finishTermination(uid); // forced: the kubelet's grace period is cut short
      const current = state.objects.get(keyOf(existing.metadata.namespace, name));
      return current ? { object: current, removed: false } : { object: existing, removed: true };
    }
    if (this.gracefulPod(def, existing, options)) {
      const next: KubeObject = {
        ...existing,
        metadata: {
          ...existing.metadata,
          deletionTimestamp: now(),
          deletionGracePeriodSeconds: options.gracePeriodSeconds ?? podGraceSeconds(existing),
        },
      };
      this.commit(state, "MODIFIED", next, existing);
      const timer = setTimeout(() => this.finishTermination(uid), this.podTerminationMs);
      timer.unref?.();
      this.terminatingPods.set(uid, timer);
      return { object: next, removed: false };
    }
    if (options.propagationPolicy === "Orphan") this.orphanDependents(uid);
    let finalizers = existing.metadata.finalizers ?? [];
    if (
      options.propagationPolicy === "Foreground" &&
      !finalizers.includes(FOREGROUND) &&
      this.hasDependents(uid)
    ) {
      finalizers = [...finalizers, FOREGROUND];
    }
    if (finalizers.length > 0 || this.isNamespace(def)) {
      if (existing.metadata.deletionTimestamp && equalJson(finalizers, existing.metadata.finalizers ?? [])) {
        return { object: existing, removed: false };
      }
      const next: KubeObject = {
        ...existing,
        metadata: {
          ...existing.metadata,
          finalizers,
          deletionTimestamp: existing.metadata.deletionTimestamp ?? now(),
          deletionGracePeriodSeconds: 0,
        },
      };
      if (finalizers.length === 0) delete next.metadata.finalizers;
      if (this.isNamespace(def)) {
        next.spec = { finalizers: [NAMESPACE_FINALIZER] };
        next.status = { ...(isObject(existing.status) ? existing.status : {}), phase: "Terminating" };
      }
      this.commit(state, "MODIFIED", next, existing);
      this.scheduleGc();
      return { object: next, removed: false };
    }
    return { object: this.remove(state, existing), removed: true };
  }

  deleteCollection(
    def: ResourceDef,
    namespace: string | undefined,
    query: ListQuery,
    options: DeleteOptions = {},
  ): ListResult {
    const listed = this.list(def, namespace, {
      labelSelector: query.labelSelector,
      fieldSelector: query.fieldSelector,
    });
    const items: KubeObject[] = [];
    for (const item of listed.items) {
      const name = item.metadata.name ?? "";
      try {
        items.push(
          this.delete(def, item.metadata.namespace, name, { propagationPolicy: options.propagationPolicy })
            .object,
        );
      } catch (err) {
        if (!(err instanceof ApiError && err.status.code === 404)) throw err;
      }
    }
    return { ...listed, metadata: { resourceVersion: String(this.rv) }, items };
  }

  // ---- watch -----------------------------------------------------------------------------

  /**
   * Starts a watch. Without a resourceVersion (or "0") it first sends ADDED for every
   * matching object; with one it replays history after it, or sends one ERROR event with a
   * 410 Expired Status when that history is gone. Events are sent synchronously from writes.
   */
  watch(
    def: ResourceDef,
    namespace: string | undefined,
    query: { labelSelector?: string | null; fieldSelector?: string | null; resourceVersion?: string | null },
    send: (event: WatchEvent) => void,
    onClose: () => void,
  ): Watcher {
    const labels = parseLabelSelector(query.labelSelector);
    const fields = parseFieldSelector(query.fieldSelector, supportedFields(def));
    const watcher = new WatcherImpl(def, def.namespaced ? namespace : undefined, labels, fields, send, () => {
      this.watchers.delete(watcher);
      onClose();
    });
    const rvParam = query.resourceVersion ?? "";
    const res = resourceKey(def.group, def.plural);
    if (rvParam === "" || rvParam === "0") {
      for (const obj of this.state(def).objects.values()) {
        if (matches(obj, def, watcher.namespace, labels, fields)) send({ type: "ADDED", object: obj });
      }
    } else {
      const from = Number(rvParam);
      if (!Number.isInteger(from) || from < 0)
        throw errors.badRequest(`invalid resource version: ${rvParam}`);
      if (from < this.compactedRv) {
        send({
          type: "ERROR",
          object: errors.expired(`too old resource version: ${from} (${this.compactedRv})`).status,
        });
        watcher.close();
        return watcher;
      }
      // History is ordered by resourceVersion: find the first entry after `from`.
      let lo = 0;
      let hi = this.history.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if ((this.history[mid]?.rv ?? 0) <= from) lo = mid + 1;
        else hi = mid;
      }
      for (let i = lo; i < this.history.length; i++) {
        const entry = this.history[i] as HistoryEntry;
        if (entry.res === res) watcher.deliver(entry);
      }
    }
    this.watchers.add(watcher);
    return watcher;
  }

  /** Ends every watch stream (as a server restart or watch timeout would). */
  closeAllWatches(): void {
    for (const w of [...this.watchers]) w.close();
  }

  watchCount(): number {
    return this.watchers.size;
  }

  // ---- internals -------------------------------------------------------------------------

  private commit(state: ResourceState, type: EventType, obj: KubeObject, prev?: KubeObject): void {
    const admission = this.admission;
    if (admission && admission.res === resourceKey(state.def.group, state.def.plural)) {
      // Each object of the request once (a deletecollection admits every item).
      this.admission = undefined;
      try {
        admission.admit(type === "DELETED" ? null : obj, prev ?? null);
      } finally {
        this.admission = admission;
      }
    }
    this.rv += 1;
    obj.metadata.resourceVersion = String(this.rv);
    const key = keyOf(obj.metadata.namespace, obj.metadata.name ?? "");
    if (type === "DELETED") {
      state.objects.delete(key);
      if (obj.metadata.uid) this.uids.delete(obj.metadata.uid);
    } else {
      state.objects.set(key, obj);
      if (obj.metadata.uid)
        this.uids.set(obj.metadata.uid, { res: resourceKey(state.def.group, state.def.plural), key });
    }
    this.index(state, type, obj, prev);
    const entry: HistoryEntry = {
      rv: this.rv,
      res: resourceKey(state.def.group, state.def.plural),
      type,
      object: obj,
    };
    if (prev) entry.prev = prev;
    this.history.push(entry);
    // Trim in batches (a slice per write would copy the whole window each time); the window
    // holds between historyLimit and historyLimit + batch events.
    if (this.history.length > this.historyLimit + Math.max(1, Math.floor(this.historyLimit / 10))) {
      const drop = this.history.length - this.historyLimit;
      const last = this.history[drop - 1];
      if (last) this.compactedRv = last.rv;
      this.history = this.history.slice(drop);
    }
    for (const w of [...this.watchers]) if (w.res === entry.res) w.deliver(entry);
  }

  private remove(state: ResourceState, obj: KubeObject): KubeObject {
    const gone: KubeObject = { ...obj, metadata: { ...obj.metadata } };
    this.commit(state, "DELETED", gone, obj);
    if (state.def.group === "apiextensions.k8s.io" && state.def.plural === "customresourcedefinitions")
      this.unregisterCrd(gone);
    this.scheduleGc();
    return gone;
  }

  private isPod(def: ResourceDef): boolean {
    return def.group === "" && def.plural === "pods";
  }

  private gracefulPod(def: ResourceDef, pod: KubeObject, options: DeleteOptions): boolean {
    const nodeName = isObject(pod.spec) ? pod.spec.nodeName : undefined;
    return (
      this.isPod(def) &&
      this.podTerminationMs !== undefined &&
      typeof nodeName === "string" &&
      nodeName !== "" &&
      options.gracePeriodSeconds !== 0 &&
      !pod.metadata.deletionTimestamp
    );
  }

  /** The kubelet is done with a terminating pod: remove it unless finalizers still hold it. */
  private finishTermination(uid: string): void {
    const timer = this.terminatingPods.get(uid);
    if (timer) clearTimeout(timer);
    this.terminatingPods.delete(uid);
    const where = this.uids.get(uid);
    const state = where ? this.resources.get(where.res) : undefined;
    const pod = where ? state?.objects.get(where.key) : undefined;
    if (!state || !pod || (pod.metadata.finalizers ?? []).length > 0) return;
    this.remove(state, pod);
  }

  private isNamespace(def: ResourceDef): boolean {
    return def.group === "" && def.plural === "namespaces";
  }

  /** A terminating namespace stays until its contents are gone (its spec.finalizers). */
  private isHeldNamespace(def: ResourceDef, obj: KubeObject): boolean {
    return (
      this.isNamespace(def) &&
      isObject(obj.spec) &&
      Array.isArray(obj.spec.finalizers) &&
      obj.spec.finalizers.length > 0
    );
  }

  private checkNamespaceWritable(def: ResourceDef, namespace: string, name: string): void {
    const ns = this.state(this.mustDef("", "namespaces")).objects.get(keyOf(undefined, namespace));
    if (!ns) throw errors.notFound({ group: "", plural: "namespaces" }, namespace);
    if (ns.metadata.deletionTimestamp) {
      throw errors.forbidden(
        def,
        name,
        `unable to create new content in namespace ${namespace} because it is being terminated`,
      );
    }
  }

  private checkTypeMeta(def: ResourceDef, obj: KubeObject): void {
    if (obj.kind !== undefined && obj.kind !== def.kind) {
      throw errors.badRequest(
        `the kind in the data (${String(obj.kind)}) does not match the expected kind (${def.kind})`,
      );
    }
    if (obj.apiVersion !== undefined && obj.apiVersion !== apiVersionOf(def)) {
      throw errors.badRequest(
        `the API version in the data (${String(obj.apiVersion)}) does not match the expected API version (${apiVersionOf(def)})`,
      );
    }
  }

  private checkMeta(def: ResourceDef, meta: ObjectMeta, name: string): void {
    const causes: { reason: string; message: string; field: string }[] = [];
    if (!name) {
      causes.push({
        reason: "FieldValueRequired",
        message: "Required value: name or generateName is required",
        field: "metadata.name",
      });
    } else {
      const pattern = this.isNamespace(def) ? DNS_LABEL : DNS_SUBDOMAIN;
      const max = this.isNamespace(def) ? 63 : 253;
      if (!pattern.test(name) || name.length > max) {
        causes.push({
          reason: "FieldValueInvalid",
          message: `Invalid value: "${name}": a lowercase RFC 1123 ${this.isNamespace(def) ? "label" : "subdomain"} must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character`,
          field: "metadata.name",
        });
      }
    }
    for (const [k, v] of Object.entries(meta.labels ?? {})) {
      if (!LABEL_KEY.test(k))
        causes.push({
          reason: "FieldValueInvalid",
          message: `Invalid value: "${k}": name part must consist of alphanumeric characters, '-', '_' or '.'`,
          field: "metadata.labels",
        });
      if (typeof v !== "string" || !LABEL_VALUE.test(v) || v.length > 63) {
        causes.push({
          reason: "FieldValueInvalid",
          message: `Invalid value: "${String(v)}": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character`,
          field: `metadata.labels`,
        });
      }
    }
    for (const [k, v] of Object.entries(meta.annotations ?? {})) {
      if (typeof v !== "string")
        causes.push({
          reason: "FieldValueInvalid",
          message: `Invalid value: annotation ${k} must be a string`,
          field: "metadata.annotations",
        });
    }
    if (causes.length > 0) throw errors.invalid(def.kind, def.group, name, causes);
  }

  private prepareForCreate(def: ResourceDef, obj: KubeObject): void {
    if (def.group === "" && def.plural === "pods") {
      // kube-apiserver resets a new pod's status; the kubelet reports it later through /status.
      obj.status = { phase: "Pending" };
      const spec = obj.spec;
      const containers = isObject(spec) ? spec.containers : undefined;
      if (!Array.isArray(containers) || containers.length === 0) {
        throw errors.invalid(def.kind, def.group, obj.metadata.name ?? "", [
          { reason: "FieldValueRequired", message: "Required value", field: "spec.containers" },
        ]);
      }
    } else if (this.isNamespace(def)) {
      obj.spec = { finalizers: [NAMESPACE_FINALIZER] };
      obj.status = { phase: "Active" };
    } else if (def.group === "apiextensions.k8s.io") {
      const parsed = defFromCrd(obj);
      if (typeof parsed === "string") {
        throw errors.invalid(def.kind, def.group, obj.metadata.name ?? "", [
          { reason: "FieldValueInvalid", message: parsed, field: "spec" },
        ]);
      }
      if (obj.metadata.name !== `${parsed.plural}.${parsed.group}`) {
        throw errors.invalid(def.kind, def.group, obj.metadata.name ?? "", [
          {
            reason: "FieldValueInvalid",
            message: `Invalid value: "${obj.metadata.name}": must be spec.names.plural+"."+spec.group`,
            field: "metadata.name",
          },
        ]);
      }
      obj.status = {
        acceptedNames: (obj.spec as Record<string, unknown>).names,
        storedVersions: [parsed.version],
        conditions: [
          {
            type: "NamesAccepted",
            status: "True",
            reason: "NoConflicts",
            message: "no conflicts found",
            lastTransitionTime: now(),
          },
          {
            type: "Established",
            status: "True",
            reason: "InitialNamesAccepted",
            message: "the initial names have been accepted",
            lastTransitionTime: now(),
          },
        ],
      };
    } else if (def.statusSubresource) {
      delete obj.status; // custom resources with a status subresource ignore status on create
    }
    if (def.group === "coordination.k8s.io" && def.plural === "leases") this.checkLease(def, obj);
    if (def.group === "" && def.plural === "events") this.checkEvent(def, obj);
  }

  /** core/v1 Event validation that a writer can get wrong: the involved object's namespace. */
  private checkEvent(def: ResourceDef, obj: KubeObject): void {
    const involved = isObject(obj.involvedObject) ? obj.involvedObject : undefined;
    const ns = typeof involved?.namespace === "string" ? involved.namespace : "";
    if (ns !== "" && ns !== obj.metadata.namespace) {
      throw errors.invalid(def.kind, def.group, obj.metadata.name ?? "", [
        {
          reason: "FieldValueInvalid",
          message: `Invalid value: "${ns}": does not match event.namespace`,
          field: "involvedObject.namespace",
        },
      ]);
    }
  }

  private checkUpdate(def: ResourceDef, existing: KubeObject, next: KubeObject): void {
    const name = existing.metadata.name ?? "";
    if (existing.metadata.deletionTimestamp) {
      const before = new Set(existing.metadata.finalizers ?? []);
      const added = (next.metadata.finalizers ?? []).filter((f) => !before.has(f));
      if (added.length > 0) {
        throw errors.invalid(def.kind, def.group, name, [
          {
            reason: "FieldValueForbidden",
            message: `Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{"${added.join('", "')}"}`,
            field: "metadata.finalizers",
          },
        ]);
      }
    }
    if (def.group === "" && def.plural === "pods") {
      // Pod specs are immutable except container images (and a few fields Hive never sets).
      const strip = (spec: unknown) => {
        if (!isObject(spec)) return spec;
        const containers = Array.isArray(spec.containers)
          ? spec.containers.map((c) => (isObject(c) ? { ...c, image: undefined } : c))
          : spec.containers;
        return { ...spec, containers, activeDeadlineSeconds: undefined, tolerations: undefined };
      };
      if (!equalJson(strip(existing.spec), strip(next.spec))) {
        throw errors.invalid(def.kind, def.group, name, [
          {
            reason: "FieldValueForbidden",
            message:
              "Forbidden: pod updates may not change fields other than `spec.containers[*].image`, `spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` (only additions to existing tolerations) or `spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
            field: "spec",
          },
        ]);
      }
    }
    if (def.group === "coordination.k8s.io" && def.plural === "leases") this.checkLease(def, next);
  }

  private checkLease(def: ResourceDef, obj: KubeObject): void {
    const spec = isObject(obj.spec) ? obj.spec : {};
    for (const field of ["acquireTime", "renewTime"]) {
      const v = spec[field];
      if (v !== undefined && v !== null && (typeof v !== "string" || !MICRO_TIME.test(v))) {
        // metav1.MicroTime fails to unmarshal anything but RFC3339 with microseconds.
        throw errors.badRequest(
          `Lease in version "v1" cannot be handled as a Lease: parsing time "${String(v)}" as "2006-01-02T15:04:05.000000Z07:00": cannot parse (spec.${field})`,
        );
      }
    }
    const dur = spec.leaseDurationSeconds;
    if (dur !== undefined && dur !== null && (!Number.isInteger(dur) || (dur as number) <= 0)) {
      throw errors.invalid(def.kind, def.group, obj.metadata.name ?? "", [
        {
          reason: "FieldValueInvalid",
          message: `Invalid value: ${String(dur)}: must be greater than 0`,
          field: "spec.leaseDurationSeconds",
        },
      ]);
    }
  }

  /** Prunes undeclared fields and applies defaults, in place (custom resources with a schema). */
  private prune(state: ResourceState, obj: KubeObject): void {
    if (state.def.schema === undefined) return;
    const pruned = pruneObject(obj, state.def.schema);
    for (const k of Object.keys(obj)) if (!(k in pruned)) delete obj[k];
    Object.assign(obj, pruned);
  }

  /** OpenAPI schema first (types, patterns), then the CRD's CEL rules, as kube-apiserver reports them. */
  private validate(state: ResourceState, obj: KubeObject): void {
    if (state.def.schema === undefined) return;
    const body = without(obj, "metadata", "apiVersion", "kind");
    const name = obj.metadata.name ?? "";
    if (state.validate && !state.validate(body)) {
      const causes = (state.validate.errors ?? []).map((e) => ({
        reason: "FieldValueInvalid",
        message: `Invalid value: ${e.message ?? "invalid"}`,
        field: fieldPath(e.instancePath),
      }));
      throw errors.invalid(state.def.kind, state.def.group, name, causes);
    }
    const failed = celFailures(
      body,
      state.def.schema,
      (expr) => parseCel(expr) as (ctx: Record<string, unknown>) => unknown,
    );
    if (failed.length > 0) {
      const causes = failed.map((f) => ({
        reason: "FieldValueInvalid",
        message: `Invalid value: ${f.message}`,
        field: f.field,
      }));
      throw errors.invalid(state.def.kind, state.def.group, name, causes);
    }
  }

  private registerCrd(crd: KubeObject): void {
    const def = defFromCrd(crd);
    if (typeof def !== "string") this.register(def);
  }

  private unregisterCrd(crd: KubeObject): void {
    const def = defFromCrd(crd);
    if (typeof def === "string") return;
    const state = this.resources.get(resourceKey(def.group, def.plural));
    if (!state) return;
    for (const obj of [...state.objects.values()])
      this.commit(state, "DELETED", { ...obj, metadata: { ...obj.metadata } }, obj);
    this.resources.delete(resourceKey(def.group, def.plural));
  }

  /** Live dependents of an owner uid (from the ownerReferences index). */
  private dependents(uid: string): { state: ResourceState; obj: KubeObject }[] {
    const out: { state: ResourceState; obj: KubeObject }[] = [];
    for (const id of this.dependentsIndex.get(uid) ?? []) {
      const found = this.lookupId(id);
      if (found) out.push(found);
    }
    return out;
  }

  private lookupId(id: string): { state: ResourceState; obj: KubeObject } | undefined {
    const cut = id.indexOf("\u0000");
    const state = this.resources.get(id.slice(0, cut));
    const obj = state?.objects.get(id.slice(cut + 1));
    return state && obj ? { state, obj } : undefined;
  }

  /** Keeps the GC's indexes current; called for every committed change. */
  private index(state: ResourceState, type: EventType, obj: KubeObject, prev: KubeObject | undefined): void {
    const id = `${resourceKey(state.def.group, state.def.plural)}\u0000${keyOf(obj.metadata.namespace, obj.metadata.name ?? "")}`;
    for (const ref of prev?.metadata.ownerReferences ?? []) {
      const set = ref.uid ? this.dependentsIndex.get(ref.uid) : undefined;
      set?.delete(id);
      if (set && set.size === 0 && ref.uid) this.dependentsIndex.delete(ref.uid);
    }
    if (type === "DELETED") {
      this.foreground.delete(id);
      if (this.isNamespace(state.def)) this.terminating.delete(obj.metadata.name ?? "");
      // Its dependents may now be orphans.
      for (const dep of this.dependentsIndex.get(obj.metadata.uid ?? "") ?? []) this.gcCandidates.add(dep);
      return;
    }
    const refs = obj.metadata.ownerReferences ?? [];
    for (const ref of refs) {
      if (!ref.uid) continue;
      const set = this.dependentsIndex.get(ref.uid) ?? new Set<string>();
      set.add(id);
      this.dependentsIndex.set(ref.uid, set);
    }
    if (refs.some((r) => !r.uid || !this.uids.has(r.uid))) this.gcCandidates.add(id);
    if (obj.metadata.deletionTimestamp && (obj.metadata.finalizers ?? []).includes(FOREGROUND))
      this.foreground.add(id);
    else this.foreground.delete(id);
    if (this.isNamespace(state.def) && obj.metadata.deletionTimestamp)
      this.terminating.add(obj.metadata.name ?? "");
    if (this.gcCandidates.size > 0 || this.foreground.size > 0 || this.terminating.size > 0)
      this.scheduleGc();
  }

  private hasDependents(uid: string): boolean {
    return this.dependents(uid).length > 0;
  }

  private orphanDependents(uid: string): void {
    for (const { state, obj } of this.dependents(uid)) {
      const refs = (obj.metadata.ownerReferences ?? []).filter((r) => r.uid !== uid);
      const next: KubeObject = { ...obj, metadata: { ...obj.metadata, ownerReferences: refs } };
      if (refs.length === 0) delete next.metadata.ownerReferences;
      this.commit(state, "MODIFIED", next, obj);
    }
  }

  private scheduleGc(): void {
    if (this.gcTimer) return;
    this.gcTimer = setTimeout(() => {
      this.gcTimer = undefined;
      this.collectGarbage();
    }, this.gcDelayMs);
    this.gcTimer.unref?.();
  }

  /**
   * What kube-controller-manager's garbage collector and namespace controller do: delete
   * dependents whose owners are all gone (background), finish foreground deletions, empty
   * terminating namespaces and remove them once empty. Works from indexes, not full scans.
   */
  collectGarbage(): void {
    for (let round = 0; round < 100; round++) {
      let changed = false;
      const candidates = [...this.gcCandidates];
      this.gcCandidates.clear();
      for (const id of candidates) {
        const found = this.lookupId(id);
        if (!found) continue;
        const { state, obj } = found;
        const refs = obj.metadata.ownerReferences ?? [];
        if (
          refs.length > 0 &&
          !obj.metadata.deletionTimestamp &&
          refs.every((r) => !r.uid || !this.uids.has(r.uid))
        ) {
          this.delete(state.def, obj.metadata.namespace, obj.metadata.name ?? "");
          changed = true;
        }
      }
      for (const id of [...this.foreground]) {
        const found = this.lookupId(id);
        if (!found) {
          this.foreground.delete(id);
          continue;
        }
        const { state, obj } = found;
        const live = this.dependents(obj.metadata.uid ?? "");
        for (const d of live) {
          if (!d.obj.metadata.deletionTimestamp) {
            this.delete(d.state.def, d.obj.metadata.namespace, d.obj.metadata.name ?? "", {
              propagationPolicy: "Foreground",
            });
            changed = true;
          }
        }
        if (live.length === 0) {
          const finalizers = (obj.metadata.finalizers ?? []).filter((f) => f !== FOREGROUND);
          this.update(state.def, obj.metadata.namespace, obj.metadata.name ?? "", {
            ...obj,
            metadata: { ...obj.metadata, finalizers },
          });
          changed = true;
        }
      }
      for (const ns of [...this.terminating]) {
        let remaining = 0;
        for (const other of [...this.resources.values()]) {
          if (!other.def.namespaced) continue;
          for (const [key, child] of [...other.objects]) {
            if (!key.startsWith(`${ns}/`)) continue;
            remaining++;
            if (!child.metadata.deletionTimestamp) {
              this.delete(other.def, ns, child.metadata.name ?? "");
              changed = true;
            }
          }
        }
        const nsState = this.resources.get(resourceKey("", "namespaces"));
        const nsObj = nsState?.objects.get(keyOf(undefined, ns));
        if (remaining === 0 && nsState && nsObj && this.isHeldNamespace(nsState.def, nsObj)) {
          this.remove(nsState, nsObj);
          changed = true;
        }
      }
      if (!changed && this.gcCandidates.size === 0) return;
    }
  }

  /** Cancels the garbage collector's timer (server shutdown). */
  dispose(): void {
    for (const t of this.terminatingPods.values()) clearTimeout(t);
    this.terminatingPods.clear();
    if (this.gcTimer) clearTimeout(this.gcTimer);
    this.gcTimer = undefined;
    this.closeAllWatches();
  }
}

class WatcherImpl implements Watcher {
  readonly def: ResourceDef;
  readonly res: string;
  readonly namespace: string | undefined;
  private readonly labels: LabelSelector;
  private readonly fields: FieldRequirement[];
  private readonly send: (event: WatchEvent) => void;
  private readonly onClose: () => void;
  private closed = false;

  constructor(
    def: ResourceDef,
    namespace: string | undefined,
    labels: LabelSelector,
    fields: FieldRequirement[],
    send: (event: WatchEvent) => void,
    onClose: () => void,
  ) {
    this.def = def;
    this.res = resourceKey(def.group, def.plural);
    this.namespace = namespace;
    this.labels = labels;
    this.fields = fields;
    this.send = send;
    this.onClose = onClose;
  }

  /** Translates a stored change into what this watch sees (objects entering or leaving its selector). */
  deliver(entry: HistoryEntry): void {
    if (this.closed) return;
    const now = matches(entry.object, this.def, this.namespace, this.labels, this.fields);
    if (entry.type === "ADDED") {
      if (now) this.send({ type: "ADDED", object: entry.object });
      return;
    }
    const before = entry.prev
      ? matches(entry.prev, this.def, this.namespace, this.labels, this.fields)
      : false;
    if (entry.type === "DELETED") {
      if (before || now) this.send({ type: "DELETED", object: entry.object });
      return;
    }
    if (before && now) this.send({ type: "MODIFIED", object: entry.object });
    else if (!before && now) this.send({ type: "ADDED", object: entry.object });
    else if (before && !now) this.send({ type: "DELETED", object: entry.object });
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.onClose();
  }
}

function supportedFields(def: ResourceDef): string[] {
  return def.namespaced
    ? ["metadata.name", "metadata.namespace", ...def.fields]
    : ["metadata.name", ...def.fields];
}

function matches(
  obj: KubeObject,
  def: ResourceDef,
  namespace: string | undefined,
  labels: LabelSelector,
  fields: readonly FieldRequirement[],
): boolean {
  if (def.namespaced && namespace !== undefined && obj.metadata.namespace !== namespace) return false;
  return matchesLabels(labels, obj.metadata.labels) && matchesFields(fields, obj);
}

function isBuiltin(def: ResourceDef): boolean {
  return !BUILTIN_RESOURCES.every((b) => b.group !== def.group || b.plural !== def.plural);
}

interface ContinueToken {
  id: string;
  offset: number;
  rv: number;
}

function encodeContinue(token: ContinueToken): string {
  return Buffer.from(JSON.stringify({ v: "hive.stand-in/v1", ...token })).toString("base64url");
}

function decodeContinue(raw: string): ContinueToken | undefined {
  try {
    const t = JSON.parse(Buffer.from(raw, "base64url").toString("utf8")) as Partial<ContinueToken>;
    if (typeof t.id === "string" && typeof t.offset === "number" && typeof t.rv === "number")
      return t as ContinueToken;
  } catch {
    // a token that does not decode is treated like an expired one: the client must re-list
  }
  return undefined;
}

/** Removes the `x-kubernetes-*` extensions so a CRD's structural schema compiles as JSON Schema. */
function stripKubernetesKeywords(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(stripKubernetesKeywords);
  if (!isObject(schema)) return schema;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(schema)) {
    if (k.startsWith("x-kubernetes-")) continue;
    out[k] =
      k === "properties" && isObject(v)
        ? Object.fromEntries(Object.entries(v).map(([p, s]) => [p, stripKubernetesKeywords(s)]))
        : stripKubernetesKeywords(v);
  }
  return out;
}

/** JSON pointer → the field path Kubernetes prints ("/spec/traps/0/path" → "spec.traps[0].path"). */
function fieldPath(pointer: string): string {
  let out = "";
  for (const part of pointer.split("/").slice(1)) {
    if (/^\d+$/.test(part)) out += `[${part}]`;
    else out += out === "" ? part : `.${part}`;
  }
  return out || "<root>";
}

/** The grace period a pod asks for (spec.terminationGracePeriodSeconds, default 30 s). */
function podGraceSeconds(pod: KubeObject): number {
  const v = isObject(pod.spec) ? pod.spec.terminationGracePeriodSeconds : undefined;
  return typeof v === "number" ? v : 30;
}
