/**
 * Loader controller (one per kernel, elected): keeps the kernel's watch map equal to the
 * HiveData of its kernel whose trap a live HivePolicy holds, drops HiveData whose trap no longer
 * exists in any HivePolicy (the reference's HiveData reconciliation), and routes kernel events:
 * accesses go to the alert pipeline with the HiveData they matched and its live trap (an
 * in-memory index by the file's identity, no API call per event); a change of the file (deleted,
 * renamed, replaced, truncated: the kernel's change hooks) is alerted to the traps that report
 * changes; a change of its name or of its directory's entries asks the owning node's discover to
 * re-resolve (resolve-requests.ts: coalesced, never dropped, retried, and in memory when that
 * discover runs in this agent).
 *
 * A HiveData is trusted for its file only: the accesses watched, and the callback, allow list
 * and tenancy an alert gets, are the live trap's (live-traps.ts). An event for a file whose
 * trap no live policy holds (a policy deleted before the next sync) is dropped and counted.
 *
 * After a restart the kernel map and the ring buffer are the previous agent's (pinned). Until
 * the first HiveData list is in, absence proves nothing: the map is not touched and events are
 * held (bounded, losses counted), then routed once the map reflects the listed HiveData; the
 * kernel does not consume them before that (KernelWatcher.holdAcks), so an agent killed while
 * holding leaves them to the next one. An
 * event is routed by its device and inode, never by slot alone: slots are this process's
 * numbering, and an event written under the previous agent's numbering must not reach
 * another trap.
 *
 * The steps, each in its own unit: the cache of policies and HiveData (loader-cache.ts); a pass
 * sweeps orphans (loader-orphans.ts), syncs the kernel map and saves the snapshot
 * (kernel-map-sync.ts), then releases the events held until then (held-events.ts); each event is
 * routed by event-router.ts.
 */
import type { HiveData } from "../../api/data.ts";
import { ANNOTATION_RESOLVE_REQUEST } from "../../api/meta.ts";
import type { HivePolicy } from "../../api/policy.ts";
import type { KernelEvent, KernelWatcher, WatchEntry } from "../kernel/contract.ts";
import type { Logger } from "../log.ts";
import type { EventDropReason } from "../metrics/metrics.ts";
import { EventRouter } from "./event-router.ts";
import { EventRoutes } from "./event-routes.ts";
import { HeldEvents } from "./held-events.ts";
import type { OnKernelAllowed } from "./kernel-allow.ts";
import { KernelMapSync } from "./kernel-map-sync.ts";
import type { AttributeAccess } from "./layer-routing.ts";
import type { ArmedData } from "./live-traps.ts";
import { LoaderCache } from "./loader-cache.ts";
import { Orphans } from "./loader-orphans.ts";
import { type DataWriter, isForbidden, objectKey, type WatchEventType } from "./ports.ts";
import { type ControllerLifecycle, createReconcileLoop } from "./reconcile-loop.ts";
import { createResolveRequests, type ResolveRequests } from "./resolve-requests.ts";
import type { RoutingSnapshot, RoutingSnapshotStore } from "./routing-snapshot.ts";

export interface LoaderOptions {
  kernelId: string;
  /**
   * This agent's node: the loader deletes only its orphans. Admission keeps each agent to its
   * own node's HiveData; another node's orphans are that node's discover's to remove (or go
   * with its Node), and stay out of the kernel map meanwhile.
   */
  nodeName: string;
  kernel: KernelWatcher;
  writer: DataWriter;
  log: Logger;
  /**
   * Called for each access event with the HiveData it matched and their live traps (several
   * when traps share a file).
   */
  onAccess: (event: KernelEvent, matched: readonly ArmedData[]) => void;
  /** Checks the kernel's allow rules let through (no event), by trap and entry; taken every `allowedHarvestMs`. */
  onAllowed?: OnKernelAllowed;
  /** How often the kernel's allowed counts are taken (default 2000 ms). */
  allowedHarvestMs?: number;
  /**
   * How long a HiveData whose trap is unknown is kept before deletion: a discover on another
   * node may have seen a new policy before this loader's watch did.
   */
  orphanGraceMs?: number;
  /**
   * Hands a re-resolve request to this agent's own discover when it owns the HiveData (true when
   * it did): no round trip through the API server. Otherwise the request is an annotation.
   */
  resolveLocally?: (d: HiveData) => boolean;
  /** How long a key a pass removed still routes the events raised before (default 30 s). */
  retiredKeyMs?: number;
  /** Backoff of re-resolve requests that failed (resolve-requests.ts). */
  resolveRetry?: { baseMs: number; maxMs: number };
  debounceMs?: number;
  /** Called with each reconcile pass's duration in seconds (hive_reconcile_duration_seconds). */
  observeReconcile?: (seconds: number) => void;
  /** Each event dropped before alerting, with why (hive_kernel_events_dropped_total). */
  onEventDropped?: (reason: EventDropReason) => void;
  /** Events held until the first sync after the HiveData list; beyond it they are counted lost. */
  maxHeldEvents?: number;
  /**
   * After each sync of the kernel map: its entries and the HiveData behind each slot (the
   * agent writes them as the watch table `hive status` names the slots' traps from).
   */
  onSynced?: (entries: readonly WatchEntry[], dataOf: (slot: number) => readonly HiveData[]) => void;
  /**
   * The policies and HiveData of the last sync, kept on the node (routing-snapshot.ts): a
   * restarted loader routes from them at once, the API server reachable or not, until its own
   * lists are in; each sync saves them again.
   */
  snapshot?: RoutingSnapshotStore;
  /**
   * Finds the container of an access to an image layer's file by its cgroup (layer-routing.ts).
   * Without it such accesses are dropped as unattributed.
   */
  attribute?: AttributeAccess;
  /** The monitor's namespace: tenancy for accesses attributed by cgroup, as discover applies it. */
  platformNamespace?: string;
}

export interface LoaderStats {
  syncs: number;
  entries: number;
  /** Entries of the last sync the kernel watch map had no room for. */
  notWatched: number;
  orphansDeleted: number;
  resolveRequests: number;
  accessEvents: number;
  /**
   * Events for a file this loader does not watch, or whose traps no live policy holds (a trap
   * removed while its event was in flight).
   */
  unmatchedEvents: number;
  /** Events that arrived before the first sync, held and routed after it. */
  heldEvents: number;
  /** Events dropped because the hold before the first sync was full. */
  heldEventsDropped: number;
  /** Accesses to an image layer's file from no container a trap applies to, or from none known. */
  layerDropped: number;
}

export interface LoaderController extends ControllerLifecycle<LoaderStats> {
  onPolicy(type: WatchEventType, policy: HivePolicy): void;
  onData(type: WatchEventType, data: HiveData): void;
  /** The HiveData behind a kernel slot (what the alert pipeline enriches from). */
  lookup(slot: number): readonly HiveData[];
  /** True while events are held unrouted (before the first sync, without a routing snapshot). */
  holding(): boolean;
  /** Whether the HiveData `namespace/name` was in the kernel's watch map at the last sync. */
  armed(key: string): boolean;
  /**
   * What selects an access to an image layer could have changed (a pod of this node added,
   * changed or gone): the kernel forgets every quieted cgroup. Call after the change is visible
   * to `attribute`.
   */
  selectionChanged(): void;
}

export function createLoaderController(options: LoaderOptions): LoaderController {
  const { kernel, writer, log, onSynced, snapshot } = options;
  const stats = emptyStats();
  const seed = snapshot?.load();
  const cache = new LoaderCache(options.kernelId, seed);
  const orphans = new Orphans({
    graceMs: options.orphanGraceMs ?? 10_000,
    nodeName: options.nodeName,
    writer,
    log,
    stats,
    retryIn: (delayMs) => runner.retryIn(delayMs),
  });
  /** `kind:major:minor:ino` → its kernel entry and the HiveData behind it: the event path's one lookup. */
  const routes = new EventRoutes({ retiredMs: options.retiredKeyMs ?? 30_000, exists: (d) => cache.has(d) });
  const kernelMap = new KernelMapSync({
    kernel,
    routes,
    stats,
    onSynced,
    snapshot,
    onAllowed: options.onAllowed,
  });
  const stopHarvest = harvestAllowed(kernelMap, options);

  async function pass(): Promise<void> {
    // Before the first lists, an empty cache would wipe the pinned map the previous agent left.
    if (!loop.synced()) return;
    cache.settle();
    const now = Date.now();
    const valid = await orphans.sweep(cache, now);
    kernelMap.sync(valid, cache.policyList(), now);
    held.release((event) => router.route(event));
  }

  const loop = createReconcileLoop(pass, stats, {
    // Each sync diffs the whole set: coalesce bursts of HiveData events (at most ~10 syncs a second).
    debounceMs: options.debounceMs ?? 100,
    onPass: options.observeReconcile,
    onError: (error) => {
      log.error("loader pass failed; retried", { error });
      runner.retryIn(1000);
    },
  });
  const { runner } = loop;
  const resolves = createLoaderResolves(options, stats);
  const { held, router } = routeEvents(options, {
    cache,
    routes,
    resolves,
    stats,
    seeded: seed !== undefined,
  });
  const lookup = (slot: number): readonly HiveData[] => routes.lookup(slot);

  // Routed by the snapshot until the first pass (the kernel map is left as pinned meanwhile).
  if (seed) routeFromSnapshot(seed, cache, kernelMap, log);

  return {
    onPolicy(type, policy) {
      // Routed by the new traps from now on, before the next sync: nothing quieted may outlive them.
      if (cache.onPolicy(type, policy)) kernel.clearQuiet?.();
      runner.trigger();
    },
    onData(type, d) {
      if (!cache.ofKernel(d)) return;
      cache.onData(type, d);
      if (type === "DELETED") {
        orphans.forget(objectKey(d));
        resolves.forget(objectKey(d));
      }
      runner.trigger();
    },
    lookup,
    holding: () => held.active && !seed,
    armed: (key) => kernelMap.armed(key),
    selectionChanged: () => kernel.clearQuiet?.(),
    ...loop.lifecycle,
    stop() {
      stopHarvest();
      router.stop();
      resolves.stop();
      loop.lifecycle.stop();
    },
  };
}

/**
 * The event path: each kernel event routed by the index, or, before the first sync without a
 * snapshot, held until it (with a snapshot, only events for a key it does not know wait).
 */
function routeEvents(
  options: LoaderOptions,
  deps: {
    cache: LoaderCache;
    routes: EventRoutes;
    resolves: ReturnType<typeof createLoaderResolves>;
    stats: LoaderStats;
    seeded: boolean;
  },
): { held: HeldEvents; router: EventRouter } {
  const { kernel, log } = options;
  const { cache, routes, resolves, stats, seeded } = deps;
  const held = new HeldEvents({
    kernel,
    max: options.maxHeldEvents ?? 65_536,
    holdAcksNow: !seeded,
    stats,
    onEventDropped: options.onEventDropped,
  });
  const router = new EventRouter({
    routes,
    held,
    armed: (data) => cache.armed(data),
    requestResolve: (d) => resolves.request(d),
    onAccess: options.onAccess,
    onEventDropped: options.onEventDropped,
    attribute: options.attribute,
    platformNamespace: options.platformNamespace ?? "",
    kernel,
    stats,
    log,
  });
  kernel.onEvent((event) => {
    if (router.stopped) return;
    if (held.active && !seeded) held.hold(event);
    else router.route(event);
  });
  return { held, router };
}

/**
 * Re-resolve requests to the HiveData's node, each counted: in memory when its discover runs in
 * this agent, otherwise an annotation on the HiveData (resolve-requests.ts).
 */
function createLoaderResolves(options: LoaderOptions, stats: LoaderStats): ResolveRequests {
  const resolves = createResolveRequests({
    send: (d, requestId) =>
      options.writer
        .annotate(d.metadata.namespace ?? "default", d.metadata.name ?? "", {
          [ANNOTATION_RESOLVE_REQUEST]: requestId,
        })
        .then(() => undefined),
    ...(options.resolveLocally ? { local: options.resolveLocally } : {}),
    // Admission allows this one annotation on another node's HiveData (nodes sharing a kernel);
    // Forbidden means an admission policy from before that exception: no retry changes it.
    isPermanent: isForbidden,
    log: options.log,
    ...(options.resolveRetry ? { backoff: options.resolveRetry } : {}),
  });
  return {
    ...resolves,
    request(d) {
      stats.resolveRequests += 1;
      resolves.request(d);
    },
  };
}

function routeFromSnapshot(
  seed: RoutingSnapshot,
  cache: LoaderCache,
  kernelMap: KernelMapSync,
  log: Logger,
): void {
  const valid = cache.armed(cache.data.values());
  kernelMap.seed(valid);
  log.info("routing events from the last synced state until the lists are in", {
    policies: seed.policies.length,
    traps: valid.length,
    savedAt: seed.savedAt,
  });
}

function emptyStats(): LoaderStats {
  return {
    syncs: 0,
    entries: 0,
    notWatched: 0,
    orphansDeleted: 0,
    resolveRequests: 0,
    accessEvents: 0,
    unmatchedEvents: 0,
    heldEvents: 0,
    heldEventsDropped: 0,
    layerDropped: 0,
  };
}

/** Takes what the kernel allowed every `allowedHarvestMs`, and once more when stopped. */
function harvestAllowed(kernelMap: KernelMapSync, options: LoaderOptions): () => void {
  if (!options.onAllowed) return () => undefined;
  const timer = setInterval(() => kernelMap.harvestAllowed(), options.allowedHarvestMs ?? 2000);
  timer.unref();
  return () => {
    clearInterval(timer);
    kernelMap.harvestAllowed();
  };
}
