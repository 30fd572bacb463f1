/**
 * This node's kernel side, while it is its kernel's loader: opening the trap program (libbpf
 * imported only then), gating its ring on the alerts and feeding its counters to the metrics,
 * and the files kept beside the pinned maps — the watch table `hive status` reads, and the
 * routing snapshot a restarted agent resumes from.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import type { AlertPipeline } from "../alerts/index.ts";
import type { LoaderOptions } from "../controllers/loader.ts";
import type { NodeTrapError } from "../controllers/ports.ts";
import {
  createRoutingSnapshotStore,
  type RoutingSnapshotStore,
  routingSnapshotFileFor,
} from "../controllers/routing-snapshot.ts";
import type { KernelWatcher } from "../kernel/contract.ts";
import { WATCH_TABLE_DIR, watchTableFileFor } from "../standalone/watch-table-file.ts";
import type { AgentBase } from "./agent-base.ts";
import { type AgentWatchTable, createAgentWatchTable } from "./watch-table.ts";

export interface KernelSide {
  /** The kernel program while this node is its loader. */
  kernel: KernelWatcher | undefined;
  /** What `hive status` reads to name this kernel's slots, while this node is its loader. */
  table: AgentWatchTable | undefined;
  /** This node's latest trap errors: the watch table lists them as not armed. */
  trapErrors: readonly NodeTrapError[];
}

export function createKernelSide(): KernelSide {
  return { kernel: undefined, table: undefined, trapErrors: [] };
}

/** Opens the program with libbpf, imported only now: nodes that never load it never touch libbpf. */
export function libbpfOpener({ config, log }: AgentBase): () => Promise<KernelWatcher> {
  return async () =>
    (await import("../kernel/open-watcher.ts")).openKernelWatcher({
      attachMode: config.attachMode,
      logger: log.child({ component: "kernel" }),
      // Loaders hold the node-local lock: pins of another version are nobody's but an old agent's.
      replaceStalePins: true,
      ...(config.pinRoot ? { pinRoot: config.pinRoot } : {}),
      ...(config.bpfObject ? { objectPath: config.bpfObject } : {}),
      ...(config.lsmFile ? { lsmFile: config.lsmFile } : {}),
      ...(config.watchCapacity ? { watchCapacity: config.watchCapacity } : {}),
      ...(config.burstGapMs ? { burstGapMs: config.burstGapMs } : {}),
    });
}

/** The loader role's opener: the program from `open`, wired to the alerts, the metrics and a new watch table. */
export function kernelSideOpener(
  side: KernelSide,
  open: () => Promise<KernelWatcher>,
  { config, log, metrics, kernelId, pinRoot }: AgentBase,
  alerts: AlertPipeline,
): () => Promise<KernelWatcher> {
  return async () => {
    const kernel = await open();
    side.kernel = kernel;
    // Events keep their ring space until their alerts are on disk or delivered.
    kernel.gateRelease?.(alerts.ringGate());
    metrics.observeKernel(() => side.kernel?.counters() ?? { events: 0n, lost: 0n, watched: 0 });
    side.table = createAgentWatchTable({
      file: watchTableFileFor(pinRoot, config.tableDir),
      kernelId,
      attachMode: kernel.attachMode,
      ...(kernel.attachReason ? { attachReason: kernel.attachReason } : {}),
      logger: log.child({ component: "watch-table" }),
    });
    side.table.unarmed(side.trapErrors);
    return kernel;
  };
}

/** After each sync of the kernel map: the watch table names the slots. */
export function kernelSynced(side: KernelSide): NonNullable<LoaderOptions["onSynced"]> {
  return (entries, dataOf) => side.table?.synced(entries, dataOf);
}

/** Discover's trap errors: kept for a watch table made later, and listed by the current one. */
export function trapErrorsRecorder(side: KernelSide): (errors: readonly NodeTrapError[]) => void {
  return (errors) => {
    side.trapErrors = errors;
    side.table?.unarmed(errors);
  };
}

/** The loader's routing, kept on the node for a restarted agent (routing-snapshot.ts). */
export function createAgentRoutingSnapshot({
  config,
  kernelId,
  log,
  pinRoot,
}: AgentBase): RoutingSnapshotStore {
  return createRoutingSnapshotStore(
    routingSnapshotFileFor(pinRoot, config.tableDir ?? WATCH_TABLE_DIR),
    kernelId,
    log.child({ component: "routing-snapshot" }),
  );
}

/** A restart on a node whose program is pinned: resumed from the pins and the snapshot at once. */
export function isResumable(pinRoot: string, snapshot: RoutingSnapshotStore): boolean {
  return existsSync(join(pinRoot, "hive_watch")) && snapshot.load() !== undefined;
}
