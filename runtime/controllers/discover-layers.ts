/**
 * The HiveData of trapped files in this node's image layers: a trap that applies to a pod here is
 * armed on every copy of its file in the layers before the pod's containers run (the loader
 * attributes accesses by cgroup). What cannot be found now is kept as it was and retried, so a
 * slow disk or an unloaded program disarms nothing.
 */
import type { HiveData } from "../../api/data.ts";
import { LABEL_TRAP_ID } from "../../api/meta.ts";
import type { FileKey } from "../kernel/contract.ts";
import type { Logger } from "../log.ts";
import type { LayerTrap } from "./discover-items.ts";
import type { PassOutcomes } from "./discover-outcomes.ts";
import { buildLayerData, isLayerData, type NodeOwner } from "./hive-data.ts";

/** The trap files in this node's image layers (runtime/discover/image-layers.ts), proven. */
export interface LayerFinder {
  /** The kernel identities of every copy of `path` in the node's image layers; throws HiveError. */
  find(path: string): FileKey[];
}

export interface LayerArming {
  layers: LayerFinder;
  kernelId: string;
  nodeName: string;
  /** Where layer HiveData live: the monitor's namespace. */
  platformNamespace: string;
  owner: NodeOwner | undefined;
  /** This node's HiveData as last seen, by namespace/name. */
  data: ReadonlyMap<string, HiveData>;
  /** How soon a pass looks again for a file that could not be found. */
  retryMs: number;
  log: Logger;
}

/** Adds the layer HiveData of `traps` to the pass's outcomes. */
export function armLayers(traps: readonly LayerTrap[], a: LayerArming, outcomes: PassOutcomes): void {
  for (const { policy, trapIndex, trapId } of traps) {
    const trap = policy.spec.traps[trapIndex];
    if (!trap) continue;
    let files: FileKey[];
    try {
      files = a.layers.find(trap.path);
    } catch (error) {
      a.log.warn("cannot find the trapped file in this node's image layers; retried", {
        trapId,
        path: trap.path,
        error,
      });
      for (const [key, d] of a.data)
        if (isLayerData(d) && d.metadata.labels?.[LABEL_TRAP_ID] === trapId) outcomes.keep.add(key);
      outcomes.retryWithin(a.retryMs);
      continue;
    }
    for (const file of files) {
      const d = buildLayerData({
        policy,
        trap,
        trapId,
        kernelId: a.kernelId,
        nodeName: a.nodeName,
        namespace: a.platformNamespace,
        file,
        owner: a.owner,
      });
      outcomes.desired.set(`${d.metadata.namespace}/${d.metadata.name}`, d);
    }
  }
}
