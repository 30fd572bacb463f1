/**
 * What `hive watch` needs to arm traps in the image layers (layer-plan.ts, layer-alerts.ts): the
 * layer finder over containerd's overlayfs snapshots, proven with the watcher's program, and who
 * an access's cgroup is. None on a machine without those snapshots or without cgroup v2 (said once).
 */
import { existsSync } from "node:fs";
import { isCgroupV2Root } from "../discover/cgroup-containers.ts";
import { createLayerFinder } from "../discover/layer-finder.ts";
import type { WritableDirs } from "../discover/writable-layers.ts";
import type { KernelWatcher } from "../kernel/contract.ts";
import type { Logger } from "../log.ts";
import { type ContainerAttribution, createContainerAttribution } from "./container-cgroups.ts";
import type { LayerSource } from "./layer-plan.ts";
import type { ContainerRecord } from "./watch-plan.ts";

/** containerd's overlayfs snapshotter's layers, at its default root. */
export const CONTAINERD_SNAPSHOTS = "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots";
export const CGROUP_ROOT = "/sys/fs/cgroup";

export interface StandaloneLayers {
  layers: LayerSource;
  attribution: ContainerAttribution;
  /** Resolves once containerd has said which snapshot directories are image layers. */
  ready: Promise<void>;
  /** Later-bound: what to do when the layers may have changed (re-plan). */
  onChange: (listener: () => void) => void;
  close(): void;
}

export function openStandaloneLayers(options: {
  snapshotsDir: string;
  cgroupRoot: string;
  records: () => Promise<readonly ContainerRecord[]>;
  /** Which snapshot directories are containers' writable layers (never searched). */
  writable: WritableDirs;
  watcher: Pick<KernelWatcher, "proofMaps">;
  logger: Logger;
  /** Said when the directory is missing (given explicitly); a default that is missing is silent. */
  explicit: boolean;
}): StandaloneLayers | undefined {
  const { logger } = options;
  if (!existsSync(options.snapshotsDir)) {
    if (options.explicit)
      logger.warn("no image layers at this path: containers are watched once they run", {
        snapshotsDir: options.snapshotsDir,
        hint: "give containerd's overlayfs snapshots directory with --image-layers",
      });
    return undefined;
  }
  if (!isCgroupV2Root(options.cgroupRoot)) {
    logger.warn("traps are not armed in the image layers: this machine's cgroups are not cgroup v2", {
      cgroupRoot: options.cgroupRoot,
      hint: "an access to a layer's file could not be told to a container; containers are watched once they run",
    });
    return undefined;
  }
  let listener = () => {};
  const proofMaps = options.watcher.proofMaps?.bind(options.watcher);
  const finder = createLayerFinder({
    snapshotsDir: options.snapshotsDir,
    ...(proofMaps ? { proofs: { current: () => proofMaps() } } : {}),
    log: logger,
    onChange: () => listener(),
    writable: options.writable,
  });
  return {
    layers: finder,
    ready: finder.ready,
    attribution: createContainerAttribution({ cgroupRoot: options.cgroupRoot, records: options.records }),
    onChange: (l) => {
      listener = l;
    },
    close: () => finder.close(),
  };
}
