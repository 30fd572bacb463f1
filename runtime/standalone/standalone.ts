/**
 * Standalone mode: the agent's kernel path and alert pipeline, with policies read from
 * files instead of from Kubernetes. Plans the watches (watch-plan.ts), keeps the kernel map
 * equal to the plan, turns kernel events into alerts (a change of the file too: deleted, renamed,
 * replaced, truncated), and re-plans when the kernel reports that a trapped file's name now names
 * another file or none, or that its directory's entries changed (re-created), when a container
 * starts or stops (containerd's event stream, container-events.ts) or when asked to (SIGHUP in
 * `hive watch`). Re-plans start at once and run one at a time; requests that arrive meanwhile are
 * coalesced into the next one, never dropped; a failed one is tried again. With the node's image
 * layers, traps with `match` are armed on the image's file before any container runs, and an
 * access to it is told to its container by cgroup (layer-plan.ts, layer-alerts.ts).
 */

import { HiveError } from "../../api/errors.ts";
import type { AlertSource } from "../alerts/alert-source.ts";
import type { KernelEvent, KernelWatcher } from "../kernel/contract.ts";
import { proveWith } from "../kernel/trap-proof.ts";
import type { Logger } from "../log.ts";
import type { ContainerAttribution } from "./container-cgroups.ts";
import {
  type ContainerChange,
  type ContainerEventSource,
  type ContainerFollower,
  type ContainerFollowState,
  type FollowOptions,
  followContainers,
} from "./container-events.ts";
import { createLayerAlerts, type LayerDrop } from "./layer-alerts.ts";
import type { LayerSource } from "./layer-plan.ts";
import type { PolicyDocument } from "./policy-files.ts";
import {
  alertSource,
  buildWatchTable,
  containerLabel,
  counterSlots,
  type LocalContainer,
  type PlanContext,
  planWatches,
  type SlotInfo,
  sourcesFor,
  trapRefs,
  type WatchPlan,
  type WatchTable,
  type WatchTarget,
} from "./watch-plan.ts";
import {
  removeWatchTableFile,
  tableRecords,
  unarmedRecords,
  writeWatchTableFile,
} from "./watch-table-file.ts";

/** Where alerts go: the alert pipeline (runtime/alerts), stdout JSON lines + callbacks. */
export interface AlertSink {
  handle(event: KernelEvent, source: AlertSource): void;
}

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

/** How long a slot a re-plan removed still routes the events raised before (ms). */
const RETIRED_SLOT_MS = 30_000;

function describeTarget(target: WatchTarget): string {
  return target.kind === "host" ? "host" : `container ${containerLabel(target.container)}`;
}

/** `namespace/id`, as container events name a container. */
const containerKey = (c: LocalContainer) => `${c.runtimeNamespace}/${c.id}`;

/** What a plan depends on in a container list: which containers run, with which init PID. */
function fingerprint(containers: readonly LocalContainer[]): string {
  return containers
    .map((c) => `${containerKey(c)}:${c.pid}`)
    .sort()
    .join(",");
}

/** Reasons of coalesced requests, bounded for the log. */
function joinReasons(reasons: readonly string[]): string {
  const [first, ...rest] = [...new Set(reasons)];
  return rest.length === 0 ? (first ?? "") : `${first} (+${rest.length} more)`;
}

export async function startStandalone(options: StandaloneOptions): Promise<Standalone> {
  const { watcher, logger } = options;
  const refs = trapRefs(options.documents);
  const slotFor = counterSlots();
  const startedAt = new Date().toISOString();
  let plan: WatchPlan = { files: [], unresolved: [], unmatched: [] };
  let table: WatchTable = { entries: [], slots: new Map() };
  let closed = false;
  let previous = new Map<string, WatchTarget>();
  /**
   * Slots a re-plan removed, kept a while for the events raised before it: a file's deletion or
   * replacement reaches user space after its directory's change, which may have re-planned
   * already. Slots stay with their file (counterSlots), so a retired slot names only that file.
   */
  const retired = new Map<number, { info: SlotInfo; until: number }>();
  let previousMissing = new Set<string>();
  let previousUnmatched = new Set<string>();
  let listed = "";
  let follower: ContainerFollower | undefined;
  /** Task start times of containers not yet armed (from their start events), by `namespace/id`. */
  const taskStarts = new Map<string, number>();
  let context: PlanContext = { kernelId: options.kernelId };
  const layerAlerts = options.imageLayers
    ? createLayerAlerts({
        attribution: options.imageLayers.attribution,
        watcher,
        sourceOf: (ref, target) => alertSource(ref, target, context),
        alert: (event, source) => options.alerts.handle(event, source),
        ...(options.onEventDropped ? { onDropped: options.onEventDropped } : {}),
        logger,
      })
    : undefined;
  let previousLayerMisses = new Set<string>();

  // Writes one at a time, so that close() can wait for the last before removing the file.
  let tableWrite: Promise<void> = Promise.resolve();
  const writeTable = () => {
    const file = options.watchTableFile;
    if (file === undefined || closed) return tableWrite;
    tableWrite = tableWrite.catch(() => undefined).then(() => writeTableTo(file));
    return tableWrite;
  };
  const writeTableTo = async (file: string) => {
    await writeWatchTableFile(file, {
      writer: "standalone",
      pid: process.pid,
      startedAt,
      updatedAt: new Date().toISOString(),
      attachMode: watcher.attachMode,
      ...(watcher.attachReason ? { attachReason: watcher.attachReason } : {}),
      kernelId: options.kernelId,
      slots: tableRecords(table),
      unarmed: unarmedRecords(plan.unresolved),
      ...(follower ? { containers: follower.state() } : {}),
    });
  };

  const apply = async (reason: string, current?: readonly LocalContainer[]) => {
    const containers = current ?? (options.listContainers ? await options.listContainers() : []);
    listed = fingerprint(containers);
    context = {
      kernelId: options.kernelId,
      containers,
      // Each trap armed on the identity the kernel checks, proven once per plan (trap-proof.ts).
      ...(watcher.proofMaps ? { prove: proveWith(watcher.proofMaps()) } : {}),
      ...(options.nodeName === undefined ? {} : { nodeName: options.nodeName }),
      ...(options.defaultCallback === undefined ? {} : { defaultCallback: options.defaultCallback }),
      ...(options.imageLayers ? { layers: options.imageLayers.layers } : {}),
    };
    plan = planWatches(refs, context);
    const before = table;
    table = buildWatchTable(plan, slotFor);
    const at = Date.now();
    for (const [slot, held] of retired) if (held.until <= at || table.slots.has(slot)) retired.delete(slot);
    for (const [slot, info] of before.slots)
      if (!table.slots.has(slot)) retired.set(slot, { info, until: at + RETIRED_SLOT_MS });
    watcher.sync(table.entries);
    const armedAtMs = Date.now();
    // Log what changed, not the whole table again on every re-plan.
    const now = new Map<string, WatchTarget>();
    for (const file of plan.files) {
      const { key } = file.resolved;
      const id = `${file.ref.trapId}|${describeTarget(file.target)}|${key.major}:${key.minor}:${key.ino}`;
      now.set(id, file.target);
      if (previous.has(id)) continue;
      const started = file.target.kind === "container" ? containerKey(file.target.container) : "";
      const startMs = taskStarts.get(started);
      logger.info("watching", {
        policy: file.ref.policy.metadata.name,
        path: file.ref.trap.path,
        target: describeTarget(file.target),
        resolvedPath: file.resolved.resolvedPath,
        device: `${key.major}:${key.minor}`,
        inode: key.ino.toString(),
        created: file.resolved.created,
        reason,
        // From containerd's task start event to this trap armed in the kernel map.
        ...(startMs === undefined ? {} : { sinceTaskStartMs: Math.round(armedAtMs - startMs) }),
      });
    }
    for (const [id, target] of previous) {
      if (now.has(id) || target.kind === "host") continue;
      logger.info("not watching any more", { target: describeTarget(target), reason });
    }
    previous = now;
    // A start is measured once, by the first plan that lists its container; starts that came
    // while this plan ran wait for the next. Bounded: a start no list ever shows is dropped.
    for (const c of containers) taskStarts.delete(containerKey(c));
    for (const [key, atMs] of taskStarts) if (armedAtMs - atMs > 60_000) taskStarts.delete(key);
    const missing = new Set<string>();
    for (const miss of plan.unresolved) {
      const id = `${miss.ref.trapId}|${describeTarget(miss.target)}|${miss.error.code}`;
      missing.add(id);
      // Said once per trap and cause, not again on every re-plan.
      if (previousMissing.has(id)) continue;
      logger.warn("trap not watched", {
        policy: miss.ref.policy.metadata.name,
        origin: miss.ref.origin,
        path: miss.ref.trap.path,
        target: describeTarget(miss.target),
        error: miss.error.describe(),
        ...(miss.parent
          ? { waitingIn: "its directory is watched: the trap is armed when the file appears" }
          : {}),
      });
    }
    previousMissing = missing;
    const layerMisses = new Set<string>();
    for (const miss of plan.layerMisses ?? []) {
      const id = `${miss.ref.trapId}|${miss.error.code}`;
      layerMisses.add(id);
      if (previousLayerMisses.has(id)) continue;
      logger.warn("trap not armed in the image layers: containers are watched once they run", {
        policy: miss.ref.policy.metadata.name,
        path: miss.ref.trap.path,
        error: miss.error.describe(),
      });
    }
    previousLayerMisses = layerMisses;
    const unmatched = new Set(plan.unmatched.map((ref) => ref.trapId));
    for (const ref of plan.unmatched) {
      if (previousUnmatched.has(ref.trapId)) continue;
      logger.warn("trap matches no container", {
        policy: ref.policy.metadata.name,
        origin: ref.origin,
        path: ref.trap.path,
        hint: !options.listContainers
          ? "no container runtime is reachable; traps with `match` apply to containers only"
          : plan.layers?.some((l) => l.refs.includes(ref))
            ? "it is armed in the image layers: a container that starts is watched from its first instruction"
            : options.containerEvents
              ? "it is armed as soon as a matching container starts"
              : "start a matching container, then send SIGHUP to re-scan",
      });
    }
    previousUnmatched = unmatched;
    await writeTable();
  };

  await apply("start");
  // With containers followed, a trap that matches none yet waits for one to start; one armed in the
  // image layers already watches the containers to come.
  const waiting =
    (options.containerEvents !== undefined && plan.unmatched.length > 0) || (plan.layers?.length ?? 0) > 0;
  if (plan.files.length === 0 && !waiting) {
    const first = plan.unresolved[0]?.error;
    throw new HiveError(
      first?.code ?? "ContainerNotFound",
      "no trapped file could be resolved: nothing to watch",
      {
        object: options.documents.map((d) => d.file).join(", "),
        hint: first
          ? `first problem: ${first.describe()}`
          : "every trap has a `match` and no running container matches it",
      },
    );
  }

  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  /** The request not started yet: later requests join it (a burst of events is one re-plan). */
  let queued: { full: boolean; reasons: string[]; done: Promise<void> } | undefined;
  /** The message of the last re-plan's failure, while re-plans fail. */
  let failure: string | undefined;
  /** Consecutive failed re-plans: each is tried again after a doubling delay. */
  let failures = 0;
  const retryMs = options.replanRetryMs ?? 500;
  const schedule = (reason: string, full: boolean): Promise<void> => {
    if (queued) {
      queued.full ||= full;
      queued.reasons.push(reason);
      return queued.done;
    }
    const job = { full, reasons: [reason], done: Promise.resolve() };
    queued = job;
    job.done = running = running
      .then(async () => {
        queued = undefined;
        if (closed) return;
        const why = joinReasons(job.reasons);
        if (job.full) return apply(why);
        // A container started or stopped: re-plan only if the running containers differ.
        const containers = options.listContainers ? await options.listContainers() : [];
        if (fingerprint(containers) !== listed) await apply(why, containers);
      })
      .then(
        () => {
          if (failure !== undefined) logger.info("re-plans work again", { after: failure });
          failure = undefined;
          failures = 0;
        },
        (error: unknown) => {
          // Said once per cause: a runtime that keeps failing is re-listed every event or period.
          const message = error instanceof Error ? error.message : String(error);
          const level = failure === message ? "debug" : "error";
          failure = message;
          failures += 1;
          const delayMs = Math.min(30_000, retryMs * 2 ** (failures - 1));
          logger[level]("re-plan failed; the previous watches stay", {
            reason: joinReasons(job.reasons),
            retryInMs: delayMs,
            error,
          });
          // A file that changed must be followed even if the runtime failed this once.
          if (!closed && timer === undefined)
            timer = setTimeout(() => {
              timer = undefined;
              void schedule(joinReasons(job.reasons), job.full);
            }, delayMs);
        },
      );
    return job.done;
  };
  /**
   * Which containers a trap selects may have changed (one started, relabelled, or deleted and made
   * again with other labels): who an access's cgroup is, is asked again, and no cgroup stays quiet.
   * Traps come from the policy files, so nothing else changes selection.
   */
  const selectionChanged = () => {
    options.imageLayers?.attribution.invalidate();
    watcher.clearQuiet?.();
  };
  /** A re-plan for a changed file or directory (selection unchanged). */
  const follow = (reason: string) => schedule(reason, true);
  const replan = (reason: string) => {
    selectionChanged();
    return schedule(reason, true);
  };
  const containersChanged = (change: ContainerChange) => {
    if (change.started) taskStarts.set(change.started.container, change.started.atMs);
    selectionChanged();
    return schedule(change.reason, false);
  };
  if (options.containerEvents && options.listContainers) {
    follower = followContainers({
      source: options.containerEvents,
      logger,
      ...options.follow,
      onChange: (change) => void containersChanged(change),
      // `hive status` shows whether the stream is connected.
      onState: () =>
        void writeTable().catch((error: unknown) =>
          logger.warn("cannot record the container event stream's state", { error }),
        ),
    });
  }

  watcher.onEvent((event) => {
    if (closed) return;
    const info = table.slots.get(event.slot) ?? retired.get(event.slot)?.info;
    if (info === undefined) {
      // Raised before a re-plan removed the slot: the file is no longer watched.
      logger.debug("event for a slot no longer watched", { slot: event.slot });
      return;
    }
    if (info.kind === "layer") {
      layerAlerts?.handle(event, info.refs);
      return;
    }
    if (event.kind === "parent" || info.kind === "parent") {
      // A trapped file's directory changed: the file may have been re-created, so its inode may be
      // new. At once: a burst of changes joins the queued re-plan.
      void follow("directory changed");
      return;
    }
    // The trapped name now names another file or none: follow it (a truncation keeps the inode).
    if (event.change !== undefined && event.change !== "truncated") void follow(`file ${event.change}`);
    for (const file of sourcesFor(info, event)) options.alerts.handle(event, file.source);
  });

  return {
    get plan() {
      return plan;
    },
    get table() {
      return table;
    },
    get following() {
      return follower?.state();
    },
    replan,
    layersChanged: () => follow("image layers changed"),
    containersChanged,
    async close() {
      closed = true;
      follower?.close();
      if (timer !== undefined) clearTimeout(timer);
      await running;
      await layerAlerts?.idle();
      await tableWrite.catch(() => undefined);
      if (options.watchTableFile !== undefined) await removeWatchTableFile(options.watchTableFile);
    },
  };
}
