/**
 * Standalone mode's traps on image layers: a trap with `match` is armed on every copy of its
 * path in the node's image layers (runtime/discover/layer-finder.ts), before any container of the
 * image runs, so that a container's first instruction is watched too. An access to a layer file
 * names no container by itself: layer-alerts.ts finds it by the accessing task's cgroup.
 */
import { HiveError, isHiveError } from "../../api/errors.ts";
import type { FileKey } from "../kernel/contract.ts";
import type { TrapRef } from "./watch-plan.ts";

/** Where a path's files are in the node's image layers (a NodeLayerFinder). */
export interface LayerSource {
  find(path: string): FileKey[];
}

/** One file of an image layer, and the traps (with `match`) on its path. */
export interface LayerFile {
  key: FileKey;
  refs: TrapRef[];
}

/** A trap whose path could not be looked for in the layers (not proven yet, unreadable layers…). */
export interface LayerMiss {
  ref: TrapRef;
  error: HiveError;
}

export const fileKeyId = (key: FileKey) => `${key.major}:${key.minor}:${key.ino}`;

/** The layer files of every trap that applies to containers. Never throws for a trap: failures are data. */
export function planLayers(
  refs: readonly TrapRef[],
  layers: LayerSource,
): { files: LayerFile[]; misses: LayerMiss[] } {
  const byKey = new Map<string, LayerFile>();
  const misses: LayerMiss[] = [];
  for (const ref of refs) {
    if (ref.trap.match === undefined) continue; // a host trap: the host's own path
    let found: FileKey[];
    try {
      found = layers.find(ref.trap.path);
    } catch (error) {
      const wrapped = isHiveError(error)
        ? error
        : new HiveError("InputUnreadable", "the image layers could not be searched", {
            object: ref.trap.path,
            cause: error,
          });
      misses.push({ ref, error: wrapped });
      continue;
    }
    for (const key of found) {
      const id = fileKeyId(key);
      const file = byKey.get(id) ?? { key, refs: [] };
      if (!file.refs.includes(ref)) file.refs.push(ref);
      byKey.set(id, file);
    }
  }
  return { files: [...byKey.values()], misses };
}
