/**
 * Standalone mode: the agent's kernel path and alert pipeline, with policies read from
 * files instead of from Kubernetes. Plans the watches (watch-plan.ts), keeps the kernel map
 * equal to the plan, turns kernel events into alerts, and re-plans when the kernel reports
 * that a trapped file's directory changed (the file was replaced or re-created) or when
 * asked to (SIGHUP in `hive watch`).
 */

import type { AlertSource } from "../alerts/alert-source.ts";
import { HiveError } from "../errors.ts";
import type { KernelEvent, KernelWatcher } from "../kernel/contract.ts";
import { proveWith } from "../kernel/trap-proof.ts";
import type { Logger } from "../log.ts";
import type { PolicyDocument } from "./policy-files.ts";
import {
  buildWatchTable,
  containerLabel,
  counterSlots,
  type LocalContainer,
  planWatches,
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
  /** Delay that collects a burst of directory changes into one re-plan. */
  replanDelayMs?: number;
}

export interface Standalone {
  /** The current plan and table (for tests and status). */
  readonly plan: WatchPlan;
  readonly table: WatchTable;
  /** Re-lists containers, re-resolves every trap and re-syncs the kernel map. */
  replan(reason: string): Promise<void>;
  /** Stops reacting to events and removes the watch-table file; the watcher is the caller's. */
  close(): Promise<void>;
}

function describeTarget(target: WatchTarget): string {
  return target.kind === "host" ? "host" : `container ${containerLabel(target.container)}`;
}

export async function startStandalone(options: StandaloneOptions): Promise<Standalone> {
  const { watcher, logger } = options;
  const refs = trapRefs(options.documents);
  const slotFor = counterSlots();
  const startedAt = new Date().toISOString();
  let plan: WatchPlan = { files: [], unresolved: [], unmatched: [] };
  let table: WatchTable = { entries: [], slots: new Map() };
  let closed = false;
  let previous = new Set<string>();
  let previousMissing = new Set<string>();

  const apply = async (reason: string) => {
    const containers = options.listContainers ? await options.listContainers() : [];
    const context = {
      kernelId: options.kernelId,
      containers,
      // Each trap armed on the identity the kernel checks, proven once per plan (trap-proof.ts).
      ...(watcher.proofMaps ? { prove: proveWith(watcher.proofMaps()) } : {}),
      ...(options.nodeName === undefined ? {} : { nodeName: options.nodeName }),
      ...(options.defaultCallback === undefined ? {} : { defaultCallback: options.defaultCallback }),
    };
    plan = planWatches(refs, context);
    table = buildWatchTable(plan, slotFor);
    watcher.sync(table.entries);
    // Log what changed, not the whole table again on every re-plan.
    const now = new Set<string>();
    for (const file of plan.files) {
      const { key } = file.resolved;
      const id = `${file.ref.trapId}|${describeTarget(file.target)}|${key.major}:${key.minor}:${key.ino}`;
      now.add(id);
      if (previous.has(id)) continue;
      logger.info("watching", {
        policy: file.ref.policy.metadata.name,
        path: file.ref.trap.path,
        target: describeTarget(file.target),
        resolvedPath: file.resolved.resolvedPath,
        device: `${key.major}:${key.minor}`,
        inode: key.ino.toString(),
        created: file.resolved.created,
        reason,
      });
    }
    previous = now;
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
    for (const ref of plan.unmatched) {
      logger.warn("trap matches no container", {
        policy: ref.policy.metadata.name,
        origin: ref.origin,
        path: ref.trap.path,
        hint: options.listContainers
          ? "start a matching container, then send SIGHUP to re-scan"
          : "no container runtime is reachable; traps with `match` apply to containers only",
      });
    }
    if (options.watchTableFile !== undefined) {
      await writeWatchTableFile(options.watchTableFile, {
        writer: "standalone",
        pid: process.pid,
        startedAt,
        updatedAt: new Date().toISOString(),
        attachMode: watcher.attachMode,
        ...(watcher.attachReason ? { attachReason: watcher.attachReason } : {}),
        kernelId: options.kernelId,
        slots: tableRecords(table),
        unarmed: unarmedRecords(plan.unresolved),
      });
    }
  };

  await apply("start");
  if (plan.files.length === 0) {
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
  const replan = (reason: string): Promise<void> => {
    running = running
      .then(() => (closed ? undefined : apply(reason)))
      .catch((error: unknown) =>
        logger.error("re-plan failed; the previous watches stay", { reason, error }),
      );
    return running;
  };

  watcher.onEvent((event) => {
    if (closed) return;
    const info = table.slots.get(event.slot);
    if (info === undefined) {
      // Raised before a re-plan removed the slot: the file is no longer watched.
      logger.debug("event for a slot no longer watched", { slot: event.slot });
      return;
    }
    if (event.kind === "parent" || info.kind === "parent") {
      // A trapped file's directory changed: the file may have been replaced (rename over,
      // delete + create), so its inode may be new. Collect a burst, then re-resolve.
      if (timer === undefined) {
        timer = setTimeout(() => {
          timer = undefined;
          void replan("directory changed");
        }, options.replanDelayMs ?? 100);
      }
      return;
    }
    for (const file of sourcesFor(info, event.accesses)) options.alerts.handle(event, file.source);
  });

  return {
    get plan() {
      return plan;
    },
    get table() {
      return table;
    },
    replan,
    async close() {
      closed = true;
      if (timer !== undefined) clearTimeout(timer);
      await running;
      if (options.watchTableFile !== undefined) await removeWatchTableFile(options.watchTableFile);
    },
  };
}
