/**
 * The agent's side of the watch table (runtime/standalone/watch-table-file.ts): after each
 * sync of the kernel map, the loader's slots and the HiveData behind them are written beside
 * the pinned maps, so that `hive status` run on the node names each slot's traps.
 * Writes are serialised and coalesced (the latest table wins); a failed write is logged,
 * never fatal: the table only decorates what status reads from the kernel.
 */

import type { HiveData } from "../../api/data.ts";
import { LABEL_POLICY, LABEL_POLICY_NAMESPACE, LABEL_TRAP_ID } from "../../api/meta.ts";
import { isLayerData } from "../controllers/hive-data.ts";
import type { NodeTrapError } from "../controllers/ports.ts";
import type { AttachMode, WatchEntry } from "../kernel/contract.ts";
import { createLatestWriter } from "../latest-writer.ts";
import type { Logger } from "../log.ts";
import {
  type WatchTableMiss,
  type WatchTableRecord,
  type WatchTableTrap,
  writeWatchTableFile,
} from "../standalone/watch-table-file.ts";

/** One record per kernel slot, its traps taken from the HiveData the loader indexed for it. */
export function agentTableRecords(
  entries: readonly WatchEntry[],
  dataOf: (slot: number) => readonly HiveData[],
): WatchTableRecord[] {
  return [...entries]
    .sort((a, b) => a.slot - b.slot)
    .map((entry) => ({
      slot: entry.slot,
      kind: entry.kind,
      device: `${entry.key.major}:${entry.key.minor}`,
      inode: entry.key.ino.toString(),
      traps: dataOf(entry.slot).map((d) => {
        const labels = d.metadata.labels ?? {};
        const notes = d.metadata.annotations ?? {};
        // Container ids come as "<runtime>://<id>" or bare; status shows 12 characters like `hive watch`.
        const id = (notes.container_id ?? "").replace(/^[a-z0-9-]+:\/\//, "").slice(0, 12);
        const pod = notes.pod_name ? `${notes.namespace ?? "default"}/${notes.pod_name} ` : "";
        const trap: WatchTableTrap = {
          policy: notes.hive_policy_name ?? labels[LABEL_POLICY] ?? "",
          trapId: labels[LABEL_TRAP_ID] ?? "",
          path: notes.path ?? "",
          // An image layer's file: every container of the image on this node, told apart by cgroup.
          target: isLayerData(d) ? "image layer" : `${pod}${notes.container_name ?? "?"} (${id})`,
          accesses: [...d.spec.accesses],
        };
        const namespace = labels[LABEL_POLICY_NAMESPACE];
        if (namespace !== undefined) trap.namespace = namespace;
        return trap;
      }),
    }));
}

/** This node's trap errors as the watch table's traps not armed, with their reason. */
export function agentUnarmedRecords(errors: readonly NodeTrapError[]): WatchTableMiss[] {
  return errors.map((e) => {
    const trap: WatchTableTrap = {
      policy: e.policyName,
      namespace: e.policyNamespace,
      trapId: e.trapId,
      // The path is in the message (what failed, on which object); the error says no more.
      path: `trap ${e.trapId.slice(0, 12)}`,
      target: e.pod ? `${e.pod} ${e.container ?? "?"}` : "?",
      accesses: [],
    };
    // Already escaped and bounded by discover: it also goes into Events and the policy status.
    return { trap, code: e.reason, message: e.message };
  });
}

export interface AgentWatchTable {
  /** The loader synced the kernel map (LoaderOptions.onSynced). */
  synced(entries: readonly WatchEntry[], dataOf: (slot: number) => readonly HiveData[]): void;
  /** Discover reported this node's trap errors (NodeAgentOptions.onTrapErrors). */
  unarmed(errors: readonly NodeTrapError[]): void;
  /** Resolves when the latest table (or its removal) is on disk. */
  idle(): Promise<void>;
}

export function createAgentWatchTable(options: {
  file: string;
  kernelId: string;
  attachMode: AttachMode;
  attachReason?: string;
  logger: Logger;
}): AgentWatchTable {
  const { file, logger } = options;
  const startedAt = new Date().toISOString();
  let latest: { slots: WatchTableRecord[]; unarmed: WatchTableMiss[] } = { slots: [], unarmed: [] };
  const writer = createLatestWriter(
    (next: typeof latest) =>
      writeWatchTableFile(file, {
        writer: "agent",
        pid: process.pid,
        startedAt,
        updatedAt: new Date().toISOString(),
        attachMode: options.attachMode,
        ...(options.attachReason ? { attachReason: options.attachReason } : {}),
        kernelId: options.kernelId,
        slots: next.slots,
        unarmed: next.unarmed,
      }),
    {
      // Once per failure streak: the loader syncs often, and the table is only a convenience.
      failed: (error) => logger.warn("cannot update the watch table read by `hive status`", { file, error }),
      recovered: () => logger.info("watch table written again", { file }),
    },
  );
  const schedule = (change: Partial<typeof latest>): void => {
    latest = { ...latest, ...change };
    writer.write(latest);
  };
  return {
    synced: (entries, dataOf) => schedule({ slots: agentTableRecords(entries, dataOf) }),
    unarmed: (errors) => schedule({ unarmed: agentUnarmedRecords(errors) }),
    idle: () => writer.idle(),
  };
}
