/**
 * Standalone mode, `hive watch`'s engine: the agent's kernel path and alert pipeline, with
 * policies read from files instead of from Kubernetes. Its steps, each in a file of its own:
 *  - plan and arm (apply-plan.ts): resolve the traps (watch-plan.ts), make the kernel map equal
 *    to the plan (watch-table.ts), say what changed (plan-log.ts);
 *  - re-plan when the kernel reports that a trapped file's name now names another file or none,
 *    or that its directory's entries changed (re-created), when a container starts or stops
 *    (containerd's event stream, container-events.ts) or when asked to (SIGHUP in `hive watch`):
 *    at once, one at a time, coalesced, never dropped, retried when failed (replan-queue.ts);
 *  - route each kernel event to the alerts of its traps (a change of the file too: deleted,
 *    renamed, replaced, truncated) or to a re-plan (event-routes.ts), and deliver it;
 *  - shut down: stop following, wait for the running re-plan and alerts, remove the table file.
 * With the node's image layers, traps with `match` are armed on the image's file before any
 * container runs, and an access to it is told to its container by cgroup (layer-plan.ts,
 * layer-alerts.ts).
 */

import type { AlertSource } from "../alerts/alert-source.ts";
import type { KernelEvent, KernelWatcher } from "../kernel/contract.ts";
import type { Logger } from "../log.ts";
import {
  applyPlan,
  assertSomethingToWatch,
  fingerprint,
  harvestAllowed,
  initialPlanState,
  type Planner,
  type PlanState,
} from "./apply-plan.ts";
import type { ContainerAttribution } from "./container-cgroups.ts";
import {
  type ContainerChange,
  type ContainerEventSource,
  type ContainerFollower,
  type ContainerFollowState,
  type FollowOptions,
  followContainers,
} from "./container-events.ts";
import { type EventRoute, routeEvent } from "./event-routes.ts";
import { createLayerAlerts, type LayerAlerts, type LayerDrop } from "./layer-alerts.ts";
import type { LayerSource } from "./layer-plan.ts";
import type { PolicyDocument } from "./policy-files.ts";
import { createReplanQueue, type ReplanQueue } from "./replan-queue.ts";
import { alertSource, type LocalContainer, trapRefs, type WatchPlan } from "./watch-plan.ts";
import { counterSlots, type WatchTable } from "./watch-table.ts";
import {
  removeWatchTableFile,
  tableRecords,
  unarmedRecords,
  type WatchTableFile,
  writeWatchTableFile,
} from "./watch-table-file.ts";

/** Where alerts go: the alert pipeline (runtime/alerts), stdout JSON lines + callbacks. */
export interface AlertSink {
  handle(event: KernelEvent, source: AlertSource): void;
  /** Checks the kernel's allow rules let through (no event), added to the entry's counts. */
  addAllowed?(source: AlertSource, entry: number, count: number): void;
}

/** How often what the kernel allowed is added to the allow counts `hive status` shows. */
const ALLOWED_HARVEST_MS = 2000;

export interface StandaloneOptions {
  documents: readonly PolicyDocument[];
  watcher: KernelWatcher;
  alerts: AlertSink;
  logger: Logger;
  kernelId: string;
  nodeName?: string;
  defaultCallback?: string;
  /** Containers of the local runtime; omitted when there is none (host traps only). */
  listContainers?: () => Promise<readonly LocalContainer[]>;
  /** Watch-table file for `hive status`; omitted to write none. */
  watchTableFile?: string;
  /** Delay before a failed re-plan is tried again (doubling up to 30 s); default 500 ms. */
  replanRetryMs?: number;
  /** containerd's event stream: containers are followed as they start and stop (with listContainers). */
  containerEvents?: ContainerEventSource;
  /** Resubscription backoff and polling period of the follower (container-events.ts defaults). */
  follow?: Pick<FollowOptions, "backoff" | "pollIntervalMs" | "connectTimeoutMs">;
  /** The node's image layers and who their accesses come from: traps armed before containers start. */
  imageLayers?: { layers: LayerSource; attribution: ContainerAttribution };
  /** An event dropped before alerting (hive_kernel_events_dropped_total). */
  onEventDropped?: (reason: LayerDrop) => void;
}

export interface Standalone {
  /** The current plan and table (for tests and status). */
  readonly plan: WatchPlan;
  readonly table: WatchTable;
  /** How container starts and stops are followed; undefined without an event stream. */
  readonly following: ContainerFollowState | undefined;
  /** Re-lists containers (their labels too), re-resolves every trap and re-syncs the kernel map. */
  replan(reason: string): Promise<void>;
  /** Re-plans for new or removed image layers (which containers a trap selects is unchanged). */
  layersChanged(): Promise<void>;
  /** Re-lists containers and re-plans only if they differ from the plan's (a container started or stopped). */
  containersChanged(change: ContainerChange): Promise<void>;
  /** Stops reacting to events and removes the watch-table file; the watcher is the caller's. */
  close(): Promise<void>;
}

/** What a running standalone keeps: the plan's state (apply-plan.ts), the follower, and whether it is closed. */
interface StandaloneState extends PlanState {
  follower: ContainerFollower | undefined;
  closed: boolean;
}

/** How a re-plan is asked for: a file changed, a re-scan (SIGHUP), or a container started or stopped. */
interface ReplanRequests {
  follow(reason: string): Promise<void>;
  replan(reason: string): Promise<void>;
  containersChanged(change: ContainerChange): Promise<void>;
}

/** The watch-table file for `hive status`. */
interface TableWriter {
  write(): Promise<void>;
  /** Resolves when the last write is done, failed or not. */
  settled(): Promise<void>;
}

export async function startStandalone(options: StandaloneOptions): Promise<Standalone> {
  const state: StandaloneState = {
    ...initialPlanState(options.kernelId),
    follower: undefined,
    closed: false,
  };
  const planner: Planner = { refs: trapRefs(options.documents), slotFor: counterSlots() };
  const tableFile = watchTableWriter(options, state);
  const layerAlerts = openLayerAlerts(options, state);

  // Plan and arm: the kernel map made equal to the plan, what changed logged and written for `hive status`.
  const apply = async (reason: string, current?: readonly LocalContainer[]) => {
    const containers = current ?? (options.listContainers ? await options.listContainers() : []);
    applyPlan(options, state, planner, reason, containers);
    await tableFile.write();
  };
  await apply("start");
  assertSomethingToWatch(options, state.plan);

  // Re-plan on request, one at a time; then follow containers and route the kernel's events.
  const queue = createReplanQueue({
    logger: options.logger,
    retryMs: options.replanRetryMs ?? 500,
    run: async ({ full, reason }) => {
      if (full) return apply(reason);
      // A container started or stopped: re-plan only if the running containers differ.
      const containers = options.listContainers ? await options.listContainers() : [];
      if (fingerprint(containers) !== state.listed) await apply(reason, containers);
    },
  });
  const requests = replanRequests(options, state, queue);
  const harvest = setInterval(() => harvestAllowed(options, state.table), ALLOWED_HARVEST_MS);
  harvest.unref();
  state.follower = followRuntime(options, requests, tableFile);
  options.watcher.onEvent((event) => {
    if (state.closed) return;
    deliver(options, event, routeEvent(event, state.table, state.retired), requests, layerAlerts);
  });

  return {
    get plan() {
      return state.plan;
    },
    get table() {
      return state.table;
    },
    get following() {
      return state.follower?.state();
    },
    replan: requests.replan,
    layersChanged: () => requests.follow("image layers changed"),
    containersChanged: requests.containersChanged,
    // Shut down: nothing new starts, then what runs is waited for; the watcher is the caller's.
    async close() {
      state.closed = true;
      state.follower?.close();
      await queue.stop();
      clearInterval(harvest);
      harvestAllowed(options, state.table);
      await layerAlerts?.idle();
      await tableFile.settled();
      if (options.watchTableFile !== undefined) await removeWatchTableFile(options.watchTableFile);
    },
  };
}

function replanRequests(
  options: StandaloneOptions,
  state: StandaloneState,
  queue: ReplanQueue,
): ReplanRequests {
  /**
   * Which containers a trap selects may have changed (one started, relabelled, or deleted and made
   * again with other labels): who an access's cgroup is, is asked again, and no cgroup stays quiet.
   * Traps come from the policy files, so nothing else changes selection.
   */
  const selectionChanged = () => {
    options.imageLayers?.attribution.invalidate();
    options.watcher.clearQuiet?.();
  };
  return {
    // A changed file or directory: selection unchanged.
    follow: (reason) => queue.schedule(reason, true),
    replan: (reason) => {
      selectionChanged();
      return queue.schedule(reason, true);
    },
    containersChanged: (change) => {
      if (change.started) state.taskStarts.set(change.started.container, change.started.atMs);
      selectionChanged();
      return queue.schedule(change.reason, false);
    },
  };
}

/** Container starts and stops, followed on containerd's event stream (with a runtime to list them). */
function followRuntime(
  options: StandaloneOptions,
  requests: ReplanRequests,
  tableFile: TableWriter,
): ContainerFollower | undefined {
  if (!options.containerEvents || !options.listContainers) return undefined;
  const { logger } = options;
  return followContainers({
    source: options.containerEvents,
    logger,
    ...options.follow,
    onChange: (change) => void requests.containersChanged(change),
    // `hive status` shows whether the stream is connected.
    onState: () =>
      void tableFile
        .write()
        .catch((error: unknown) =>
          logger.warn("cannot record the container event stream's state", { error }),
        ),
  });
}

/** Delivers a routed kernel event: alerts, a layer file's container, or a re-plan to follow a change. */
function deliver(
  options: StandaloneOptions,
  event: KernelEvent,
  route: EventRoute,
  requests: ReplanRequests,
  layerAlerts: LayerAlerts | undefined,
): void {
  switch (route.to) {
    case "nowhere":
      options.logger.debug("event for a slot no longer watched", { slot: event.slot });
      return;
    case "layer":
      layerAlerts?.handle(event, route.refs);
      return;
    case "replan":
      // At once: a burst of changes joins the queued re-plan.
      void requests.follow(route.reason);
      return;
    case "alerts":
      if (route.follow !== undefined) void requests.follow(route.follow);
      for (const source of route.sources) options.alerts.handle(event, source);
  }
}

/** Accesses to image layers' files, told to their containers by cgroup; none without image layers. */
function openLayerAlerts(options: StandaloneOptions, state: StandaloneState): LayerAlerts | undefined {
  if (!options.imageLayers) return undefined;
  return createLayerAlerts({
    attribution: options.imageLayers.attribution,
    watcher: options.watcher,
    sourceOf: (ref, target) => alertSource(ref, target, state.context),
    alert: (event, source) => options.alerts.handle(event, source),
    ...(options.onEventDropped ? { onDropped: options.onEventDropped } : {}),
    logger: options.logger,
  });
}

/** Writes one at a time, so that close() can wait for the last before removing the file. */
function watchTableWriter(options: StandaloneOptions, state: StandaloneState): TableWriter {
  const startedAt = new Date().toISOString();
  let last: Promise<void> = Promise.resolve();
  return {
    write() {
      const file = options.watchTableFile;
      if (file === undefined || state.closed) return last;
      // The content when the write starts, not when it was asked for.
      last = last
        .catch(() => undefined)
        .then(() => writeWatchTableFile(file, tableContent(options, state, startedAt)));
      return last;
    },
    settled: () => last.catch(() => undefined),
  };
}

function tableContent(options: StandaloneOptions, state: StandaloneState, startedAt: string): WatchTableFile {
  const { watcher } = options;
  return {
    writer: "standalone",
    pid: process.pid,
    startedAt,
    updatedAt: new Date().toISOString(),
    attachMode: watcher.attachMode,
    ...(watcher.attachReason ? { attachReason: watcher.attachReason } : {}),
    kernelId: options.kernelId,
    slots: tableRecords(state.table),
    unarmed: unarmedRecords(state.plan.unresolved),
    ...(state.follower ? { containers: state.follower.state() } : {}),
  };
}
