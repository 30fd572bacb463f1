/**
 * What the loader routes events by (the live policies and this kernel's HiveData), saved after
 * each sync in a root-only file beside the watch table: a loader restarted while the API server
 * is away routes from it at once — alerts flow from the first event — instead of holding events
 * until its lists are in. The file is trusted like the pins beside it (root on the node writes
 * both); it names a boot ID, so a snapshot of another boot of the kernel is never used.
 */
import { readFileSync, rmSync } from "node:fs";
import type { HiveData } from "../../api/data.ts";
import type { HivePolicy } from "../../api/policy.ts";
import { createLatestWriter } from "../latest-writer.ts";
import type { Logger } from "../log.ts";
import { writePrivateJsonFile } from "../private-file.ts";
import { specProblems } from "./ports.ts";

export interface RoutingSnapshot {
  policies: HivePolicy[];
  data: HiveData[];
  /** When it was saved (ISO time). */
  savedAt: string;
}

export interface RoutingSnapshotStore {
  /** The last snapshot of this kernel, or undefined (none, another boot, unreadable: logged). */
  load(): RoutingSnapshot | undefined;
  /** Saves in the background; the latest wins, a failure is logged. */
  save(snapshot: Omit<RoutingSnapshot, "savedAt">): void;
  /** Resolves when the latest snapshot is on disk. */
  idle(): Promise<void>;
}

/** The file's format: bumped whenever what it holds or means changes. */
export const ROUTING_SNAPSHOT_VERSION = 2;

interface SnapshotFile extends RoutingSnapshot {
  version: number;
  kernelId: string;
}

/** The snapshot file of the agents pinning under `pinRoot`: /run/hive/<basename>.routing.json. */
export function routingSnapshotFileFor(pinRoot: string, dir: string): string {
  return `${dir}/${pinRoot.split("/").filter(Boolean).pop() ?? "hive"}.routing.json`;
}

export function createRoutingSnapshotStore(
  file: string,
  kernelId: string,
  logger: Logger,
): RoutingSnapshotStore {
  const writer = createLatestWriter((next: SnapshotFile) => writePrivateJsonFile(file, next), {
    // Once per failure streak: a restart then holds events until its lists, as without it.
    failed: (error) => {
      let removed = true;
      try {
        rmSync(file, { force: true });
      } catch {
        removed = false;
      }
      logger.warn(
        removed
          ? "cannot save the routing snapshot; the last one is removed (a restart waits for the lists)"
          : "cannot save the routing snapshot, nor remove the last one: a restart routes by it until the lists are in",
        { file, error },
      );
    },
  });
  return {
    load() {
      let parsed: Partial<SnapshotFile>;
      try {
        parsed = JSON.parse(readFileSync(file, "utf8")) as Partial<SnapshotFile>;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "ENOENT")
          logger.warn("the routing snapshot is unreadable; waiting for the lists instead", { file, error });
        return undefined;
      }
      if (parsed.version !== ROUTING_SNAPSHOT_VERSION) {
        logger.info("the routing snapshot is of another format; waiting for the lists instead", {
          file,
          version: parsed.version ?? null,
        });
        return undefined;
      }
      if (parsed.kernelId !== kernelId || !Array.isArray(parsed.policies) || !Array.isArray(parsed.data))
        return undefined;
      return {
        policies: parsed.policies.filter((p) => specProblems(p) === undefined),
        data: parsed.data,
        savedAt: String(parsed.savedAt ?? ""),
      };
    },
    save(snapshot) {
      writer.write({
        version: ROUTING_SNAPSHOT_VERSION,
        kernelId,
        savedAt: new Date().toISOString(),
        ...snapshot,
      });
    },
    idle: () => writer.idle(),
  };
}
