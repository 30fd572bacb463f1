/**
 * How this node finds containers and their trapped files: the container runtime, the trap
 * path resolver, and — where configured, on cgroup v2 — the image layers, whose files are
 * trapped before containers start, with the cgroup → container lookup their accesses need.
 */
import { dirname } from "node:path";
import { createOriginOf, isCgroupV2Root, type OriginOf } from "../discover/cgroup-containers.ts";
import { type ContainerRuntime, createContainerRuntime } from "../discover/container-runtime.ts";
import { createFileResolver, type FileResolver } from "../discover/file-resolver.ts";
import { createLayerFinder, type NodeLayerFinder } from "../discover/layer-finder.ts";
import { containerdWritableDirs } from "../discover/writable-layers.ts";
import { PinnedProofMaps } from "../kernel/trap-proof.ts";
import type { AgentBase } from "./agent-base.ts";
import type { AgentConfig } from "./config.ts";

export interface NodeDiscovery {
  runtime: ContainerRuntime;
  resolver: FileResolver;
  layers: NodeLayerFinder | undefined;
  originOf: OriginOf | undefined;
  /** Called when the image layers change; discover's, once the agent runs. */
  onLayersChanged: () => void;
}

/**
 * Starts discovery. With `proveTraps`, every trap is proven with the maps pinned for this
 * node's kernel before it is armed (part of the kernel boundary: a replaced kernel has no maps
 * to prove with).
 */
export async function startDiscovery(base: AgentBase, proveTraps: boolean): Promise<NodeDiscovery> {
  const { config, metrics, pinRoot } = base;
  const runtime = createContainerRuntime({
    socket: config.runtimeSocket,
    namespaces: config.containerdNamespaces,
    procRoot: config.procRoot,
    // After containerd's task API: CRI answers for runtimes that are not containerd (CRI-O).
    cri: true,
  });
  const resolver = createFileResolver(runtime, config.procRoot, {
    timeoutMs: config.resolveTimeoutMs,
    ...(proveTraps ? { proofPinRoot: pinRoot } : {}),
  });
  metrics.observeResolver(() => resolver.stats?.() ?? { stuck: 0, timeouts: 0 });
  const discovery: NodeDiscovery = {
    runtime,
    resolver,
    layers: undefined,
    originOf: undefined,
    onLayersChanged: () => {},
  };
  const imageLayers = usableImageLayers(base);
  if (imageLayers) {
    discovery.layers = findLayers(base, imageLayers, proveTraps, () => discovery.onLayersChanged());
    // Armed from the first pass only once containerd said which directories are images' layers.
    await discovery.layers.ready;
    discovery.originOf = createOriginOf({
      cgroupRoot: config.cgroupRoot,
      runtimeStateDir: config.runtimeStateDir ?? dirname(config.runtimeSocket),
      namespaces: config.containerdNamespaces,
    });
  }
  return discovery;
}

/** Image layers only on cgroup v2: an access to a layer's file is told to its container by its cgroup. */
export function imageLayersFor(
  config: Pick<AgentConfig, "imageLayers" | "cgroupRoot">,
  isCgroupV2: (root: string) => boolean,
): string | undefined {
  return config.imageLayers && isCgroupV2(config.cgroupRoot) ? config.imageLayers : undefined;
}

function usableImageLayers({ config, log }: AgentBase): string | undefined {
  const imageLayers = imageLayersFor(config, isCgroupV2Root);
  if (config.imageLayers && !imageLayers)
    log.warn("traps are not armed in the image layers: the node's cgroups are not cgroup v2", {
      cgroupRoot: config.cgroupRoot,
      hint: "an access to a layer's file could not be told to a container; traps are armed per running container",
    });
  return imageLayers;
}

function findLayers(
  { config, log, pinRoot }: AgentBase,
  snapshotsDir: string,
  proveTraps: boolean,
  onChange: () => void,
): NodeLayerFinder {
  return createLayerFinder({
    snapshotsDir,
    ...(proveTraps ? { proofs: new PinnedProofMaps(pinRoot) } : {}),
    log: log.child({ component: "image-layers" }),
    onChange,
    // Containers' writable layers sit beside the image's: containerd says which they are.
    writable: containerdWritableDirs({ socket: config.runtimeSocket }),
  });
}
