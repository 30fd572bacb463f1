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
 */
import type { HiveData } from "../../api/data.ts";
import { ANNOTATION_RESOLVE_REQUEST, LABEL_KERNEL_ID, LABEL_NODE, LABEL_TRAP_ID } from "../../api/meta.ts";
import type { HivePolicy } from "../../api/policy.ts";
import type { KernelEvent, KernelWatcher, WatchEntry } from "../kernel/contract.ts";
import type { Logger } from "../log.ts";
import type { EventDropReason } from "../metrics/metrics.ts";
import { createAttributionRetry } from "./attribution-retry.ts";
import { EventRoutes } from "./event-routes.ts";
import { isLayerData } from "./hive-data.ts";
import { type AttributeAccess, layerFingerprint, quietKey, routeLayerAccess } from "./layer-routing.ts";
import { type ArmedData, indexLiveTraps, type LiveTrap, trapWantsEvent } from "./live-traps.ts";
import { createObjectRetries } from "./object-retries.ts";
import { type DataWriter, isForbidden, objectKey, specProblems, type WatchEventType } from "./ports.ts";
import { type ControllerLifecycle, createReconcileLoop } from "./reconcile-loop.ts";
import { createResolveRequests } from "./resolve-requests.ts";
import type { RoutingSnapshotStore } from "./routing-snapshot.ts";
import { WatchEntries } from "./watch-entries.ts";

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
  const { kernelId, kernel, writer, log } = options;
  const orphanGraceMs = options.orphanGraceMs ?? 10_000;
  const policies = new Map<string, HivePolicy>();
  /** The live traps by id, rebuilt after a policy change (undefined until then). */
  let traps: Map<string, LiveTrap> | undefined;
  const liveTraps = (): Map<string, LiveTrap> => {
    traps ??= indexLiveTraps(policies.values());
    return traps;
  };
  const trapOf = (d: HiveData): LiveTrap | undefined =>
    liveTraps().get(d.metadata.labels?.[LABEL_TRAP_ID] ?? "");
  const data = new Map<string, HiveData>();
  const orphanSince = new Map<string, number>();
  /** Orphan deletes that failed, each on its own backoff. */
  const deletes = createObjectRetries();
  const watchEntries = new WatchEntries();
  /** `kind:major:minor:ino` → its kernel entry and the HiveData behind it: the event path's one lookup. */
  const routes = new EventRoutes({
    retiredMs: options.retiredKeyMs ?? 30_000,
    exists: (d) => data.has(objectKey(d)),
  });
  let stopped = false;
  /** The layer entries the quiet map was last cleared for (layerFingerprint). */
  let quietFor: string | undefined;
  /** Objects known only from the snapshot: gone at the first pass after the lists, unless listed again. */
  const provisional = new Set<string>();
  const seed = options.snapshot?.load();
  for (const p of seed?.policies ?? []) {
    policies.set(objectKey(p), p);
    provisional.add(`policy:${objectKey(p)}`);
  }
  for (const d of seed?.data ?? []) {
    if (d.metadata.labels?.[LABEL_KERNEL_ID] !== kernelId) continue;
    data.set(objectKey(d), d);
    provisional.add(`data:${objectKey(d)}`);
  }
  /**
   * Events that wait for the first sync (undefined once it ran): without a snapshot, every event;
   * with one, only those for a key it does not know (it may predate traps armed in the pinned map:
   * its last save failed, or came after the agent's death), the rest route by it at once. Held
   * events stay in the ring too until routed: an agent killed meanwhile leaves them to the next.
   */
  let held: KernelEvent[] | undefined = [];
  let releaseHeld = seed ? undefined : kernel.holdAcks?.();
  const maxHeld = options.maxHeldEvents ?? 65_536;
  const stats: LoaderStats = {
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

  /** The HiveData written to the kernel's map by the last sync (readiness: traps-armed.ts). */
  let armedKeys = new Set<string>();

  async function pass(): Promise<void> {
    // Before the first lists, an empty cache would wipe the pinned map the previous agent left.
    if (!loop.synced()) return;
    if (provisional.size > 0) {
      // The lists are in: what the snapshot held and they did not is gone.
      for (const key of provisional) {
        const [kind, ...rest] = key.split(":");
        if (kind === "policy") policies.delete(rest.join(":"));
        else data.delete(rest.join(":"));
      }
      provisional.clear();
      traps = undefined;
    }
    const valid: ArmedData[] = [];
    const now = Date.now();
    for (const [key, d] of data) {
      const trap = trapOf(d);
      if (trap) {
        orphanSince.delete(key);
        valid.push({ data: d, trap });
        continue;
      }
      const since = orphanSince.get(key) ?? now;
      orphanSince.set(key, since);
      if (now - since >= orphanGraceMs) {
        if (d.metadata.labels?.[LABEL_NODE] !== options.nodeName || !deletes.due(key, now)) continue;
        // One delete that keeps failing must not hold the kernel map's sync below: retried alone.
        try {
          await writer.remove(d.metadata.namespace ?? "default", d.metadata.name ?? "");
        } catch (error) {
          const delayMs = deletes.failed(key, now);
          log.warn("deleting HiveData whose trap no longer exists failed; retried", {
            name: key,
            delayMs,
            error,
          });
          continue;
        }
        log.info("deleted HiveData whose trap no longer exists", { name: key });
        data.delete(key);
        orphanSince.delete(key);
        deletes.forget(key);
        stats.orphansDeleted += 1;
      } else {
        runner.retryIn(orphanGraceMs - (now - since));
      }
    }
    const nextDelete = deletes.nextDueInMs(now);
    if (nextDelete !== Number.POSITIVE_INFINITY) runner.retryIn(Math.max(100, nextDelete));

    const byKey = watchEntries.index(valid);
    const entries = [...byKey.values()].map((v) => v.entry);
    // Another layer entry, group number or HiveData behind one: what selects may have changed, or a
    // group number gone to another layer. Every quieted cgroup is forgotten before the sync; only
    // route() quiets again, against the routes written below.
    const layers = layerFingerprint(byKey);
    if (layers !== quietFor) {
      kernel.clearQuiet?.();
      quietFor = layers;
    }
    // A full map takes what fits (the kernel watcher logs it; readiness, metrics and
    // `hive status` report it) and takes the rest as soon as entries go.
    stats.notWatched = kernel.sync(entries).notWatched.length;
    routes.replace(byKey, true, now);
    armedKeys = new Set(valid.map((v) => objectKey(v.data)));
    stats.syncs += 1;
    stats.entries = entries.length;
    options.onSynced?.(entries, lookup);
    options.snapshot?.save({ policies: [...policies.values()], data: valid.map((v) => v.data) });
    if (held) {
      const waiting = held;
      held = undefined;
      for (const event of waiting) route(event);
      releaseHeld?.();
    }
  }

  /** Keeps `event` for the first sync (bounded: beyond, it is counted lost). */
  function hold(waiting: KernelEvent[], event: KernelEvent): void {
    if (waiting.length >= maxHeld) {
      stats.heldEventsDropped += 1;
      options.onEventDropped?.("hold_full");
      return;
    }
    releaseHeld ??= kernel.holdAcks?.();
    waiting.push(event);
    stats.heldEvents += 1;
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

  const resolves = createResolveRequests({
    send: (d, requestId) =>
      writer
        .annotate(d.metadata.namespace ?? "default", d.metadata.name ?? "", {
          [ANNOTATION_RESOLVE_REQUEST]: requestId,
        })
        .then(() => undefined),
    ...(options.resolveLocally ? { local: options.resolveLocally } : {}),
    // Admission allows this one annotation on another node's HiveData (nodes sharing a kernel);
    // Forbidden means an admission policy from before that exception: no retry changes it.
    isPermanent: isForbidden,
    log,
    ...(options.resolveRetry ? { backoff: options.resolveRetry } : {}),
  });
  function requestResolve(d: HiveData): void {
    stats.resolveRequests += 1;
    resolves.request(d);
  }

  const lookup = (slot: number): readonly HiveData[] => routes.lookup(slot);

  /** Layer accesses whose container the pod's status does not name yet (attribution-retry.ts). */
  const unnamed = createAttributionRetry({
    retry: (event) => route(event, true),
    ...(kernel.holdAcks ? { hold: () => kernel.holdAcks?.() ?? (() => undefined) } : {}),
    giveUp: () => {
      stats.layerDropped += 1;
      options.onEventDropped?.("unattributed");
    },
    onError: (error) =>
      log.error("routing a waiting layer access failed; it is counted unattributed", { error }),
  });

  /** Routes one event; with `retrying`, false when its container still cannot be named (it waits on). */
  function route(event: KernelEvent, retrying = false): boolean {
    const watched = routes.find(event);
    // Only with a snapshot are events routed before the first sync: one it does not know waits.
    if (!watched && held) {
      hold(held, event);
      return true;
    }
    if (!watched) {
      stats.unmatchedEvents += 1;
      options.onEventDropped?.("unmatched");
      return true;
    }
    if (event.kind === "parent" || watched.entry.kind === "parent") {
      for (const d of watched.data) requestResolve(d);
      return true;
    }
    // The name now names another file, or none: the trap follows it (truncation keeps the inode).
    if (event.change !== undefined && event.change !== "truncated")
      for (const d of watched.data) requestResolve(d);
    // The traps as they are now: one removed since the last sync alerts nobody.
    const armed: ArmedData[] = [];
    for (const d of watched.data) {
      const trap = trapOf(d);
      if (trap) armed.push({ data: d, trap });
    }
    if (armed.length === 0) {
      stats.unmatchedEvents += 1;
      options.onEventDropped?.("unmatched");
      return true;
    }
    const layer = armed.filter((a) => isLayerData(a.data));
    if (layer.length > 0) {
      const routed = routeLayerAccess(
        event,
        layer,
        options.attribute?.(event),
        options.platformNamespace ?? "",
      );
      armed.splice(0, armed.length, ...armed.filter((a) => !isLayerData(a.data)));
      if ("matched" in routed) armed.push(...routed.matched);
      else if (armed.length === 0 && routed.dropped === "unattributed" && routed.retry) {
        if (!retrying) unnamed.park(event);
        return false;
      } else if (armed.length === 0) {
        stats.layerDropped += 1;
        options.onEventDropped?.(routed.dropped);
        // The container's next accesses to this layer alert nobody either: not events any more.
        const quiet = quietKey(event, routed, routes.synced(event));
        if (quiet) kernel.quiet?.(quiet.cgroupId, quiet.group);
        return true;
      }
    }
    stats.accessEvents += 1;
    const wanted = armed.filter(({ trap }) => trapWantsEvent(trap.trap, event));
    if (wanted.length > 0) options.onAccess(event, wanted);
    return true;
  }

  if (seed) {
    // Routed by the snapshot until the first pass (the kernel map is left as pinned meanwhile).
    const valid: ArmedData[] = [];
    for (const d of data.values()) {
      const trap = trapOf(d);
      if (trap) valid.push({ data: d, trap });
    }
    routes.replace(watchEntries.index(valid), false);
    // Fresh maps (an upgrade to another map layout replaced them): watched from the snapshot now,
    // not from the first list; pinned maps of this layout are left as they are.
    if (kernel.counters().watched === 0 && routes.size > 0)
      stats.notWatched = kernel.sync([...routes.routes()].map((v) => v.entry)).notWatched.length;
    log.info("routing events from the last synced state until the lists are in", {
      policies: seed.policies.length,
      traps: valid.length,
      savedAt: seed.savedAt,
    });
  }

  kernel.onEvent((event) => {
    if (stopped) return;
    if (held && !seed) hold(held, event);
    else route(event);
  });

  return {
    onPolicy(type, policy) {
      provisional.delete(`policy:${objectKey(policy)}`);
      const had = policies.get(objectKey(policy));
      if (type === "DELETED" || specProblems(policy)) policies.delete(objectKey(policy));
      else policies.set(objectKey(policy), policy);
      traps = undefined;
      // Routed by the new traps from now on, before the next sync: nothing quieted may outlive them.
      // A status write (the same spec) changes no trap.
      const now = policies.get(objectKey(policy));
      if (
        (had === undefined) !== (now === undefined) ||
        JSON.stringify(had?.spec) !== JSON.stringify(now?.spec)
      )
        kernel.clearQuiet?.();
      runner.trigger();
    },
    onData(type, d) {
      if (d.metadata.labels?.[LABEL_KERNEL_ID] !== kernelId) return;
      provisional.delete(`data:${objectKey(d)}`);
      if (type === "DELETED") {
        const key = objectKey(d);
        data.delete(key);
        orphanSince.delete(key);
        resolves.forget(key);
        deletes.forget(key);
      } else data.set(objectKey(d), d);
      runner.trigger();
    },
    lookup,
    holding: () => held !== undefined && !seed,
    armed: (key) => armedKeys.has(key),
    selectionChanged: () => kernel.clearQuiet?.(),
    ...loop.lifecycle,
    stop() {
      stopped = true;
      unnamed.stop();
      resolves.stop();
      loop.lifecycle.stop();
    },
  };
}
