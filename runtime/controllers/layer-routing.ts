/**
 * Accesses to a trapped file in an image layer (one inode that every container of the image
 * reaches): the container, pod and trap come from the accessing task's cgroup, never from the
 * overlay the file was reached through. The node's discover knows its pods; the runtime's bundle
 * names a container before the pod's status does (runtime/discover/cgroup-containers.ts).
 *
 * The alert is the one the container's own HiveData would give: the layer's HiveData is turned
 * into that container's (buildHiveData), so the pipeline, allow lists and tenancy see no difference.
 */
import type { V1Pod } from "@kubernetes/client-node";
import type { HiveData } from "../../api/data.ts";
import { LABEL_KERNEL_ID, LABEL_NODE, LABEL_TRAP_ID } from "../../api/meta.ts";
import type { HivePolicy } from "../../api/policy.ts";
import type { KernelEvent, WatchEntry } from "../kernel/contract.ts";
import { buildHiveData, isLayerData } from "./hive-data.ts";
import type { ArmedData } from "./live-traps.ts";
import { compileMatch, policyReachesPod, selectsContainer } from "./match.ts";

/** The container an access came from, as the node that runs it knows it. */
export interface AccessOrigin {
  pod: V1Pod;
  /** The runtime's id (hex, no scheme). */
  containerId: string;
  /** `containerd`, `cri-o`: how the pod's status prefixes the id. */
  scheme: string;
  /** Undefined while neither the pod's status nor the runtime names it. */
  containerName: string | undefined;
}

/**
 * Finds the container of an access by its cgroup: null when the cgroup is no pod's container (the
 * host, a system service), undefined when it is one this node cannot name, `"pod-unknown"` when
 * it is a kubelet's container of a pod this node does not know yet (its pod list not in).
 */
export type AttributeAccess = (event: KernelEvent) => AccessOrigin | null | undefined | "pod-unknown";

/**
 * `retry`: a kubelet's container whose pod is not known yet, or not which of its containers this
 * is (the pod's status does not name it yet): worth routing again a moment later.
 */
export type LayerRoute =
  | { matched: ArmedData[] }
  | { dropped: "unattributed"; retry?: true }
  | { dropped: "unselected" };

/** The container's runtime id as the pod's status spells it, and the name it gives it. */
function statusName(pod: V1Pod, containerId: string): string | undefined {
  const all = [...(pod.status?.containerStatuses ?? []), ...(pod.status?.initContainerStatuses ?? [])];
  return all.find((s) => s.containerID?.replace(/^[a-z0-9-]+:\/\//, "") === containerId)?.name;
}

/**
 * The armed layer HiveData that apply to the access's container, each turned into that
 * container's HiveData. `platformNamespace` decides tenancy as discover does.
 */
export function routeLayerAccess(
  event: KernelEvent,
  layer: readonly ArmedData[],
  origin: ReturnType<AttributeAccess>,
  platformNamespace: string,
): LayerRoute {
  if (origin === null) return { dropped: "unselected" };
  if (origin === undefined) return { dropped: "unattributed" };
  if (origin === "pod-unknown") return { dropped: "unattributed", retry: true };
  const name = statusName(origin.pod, origin.containerId) ?? origin.containerName;
  if (name === undefined) return { dropped: "unattributed", retry: true };
  const matched: ArmedData[] = [];
  for (const armed of layer) {
    const { trap, policy } = armed.trap;
    if (!policyReachesPod(policy.namespace, platformNamespace, origin.pod)) continue;
    const compiled = compileMatch(trap);
    if (!compiled.ok || !selectsContainer(compiled.match, origin.pod, name)) continue;
    matched.push({ data: containerData(armed, origin, name, event), trap: armed.trap });
  }
  return matched.length > 0 ? { matched } : { dropped: "unselected" };
}

function containerData(armed: ArmedData, origin: AccessOrigin, name: string, event: KernelEvent): HiveData {
  const d = armed.data;
  const labels = d.metadata.labels ?? {};
  const { policy, trap, trapId } = armed.trap;
  const key = event.key;
  return buildHiveData({
    policy: { metadata: { namespace: policy.namespace, name: policy.name } } as HivePolicy,
    trap,
    trapId,
    pod: origin.pod,
    container: { name, containerId: `${origin.scheme}://${origin.containerId}` },
    kernelId: labels[LABEL_KERNEL_ID] ?? "",
    nodeName: labels[LABEL_NODE] ?? "",
    namespace: d.metadata.namespace ?? "",
    file: key,
    // The layer's directory is never replaced in place (an image layer is read-only).
    parent: key,
  });
}

/**
 * The quiet-map key (KernelWatcher.quiet) an access to an image layer's file earns, or undefined.
 * Only a drop as `unselected` (no trap selects that container, or the cgroup is no pod's): one
 * `unattributed` may be attributable a moment later. Only an access raised on the layer's own
 * entry (group == slot) as this process last synced it (`synced`: undefined before the first
 * sync, or once the key is gone), so that a group number the kernel read before a renumbering
 * never quiets another layer; never a change of the file, which re-resolves whoever makes it.
 */
export function quietKey(
  event: KernelEvent,
  route: LayerRoute,
  synced: WatchEntry | undefined,
): { cgroupId: bigint; group: number } | undefined {
  if (!("dropped" in route) || route.dropped !== "unselected") return undefined;
  if (event.kind !== "file" || event.change !== undefined || event.followed) return undefined;
  const group = event.group;
  if (group === undefined || group === 0 || event.slot !== group) return undefined;
  if (synced?.kind !== "file" || synced.slot !== group || synced.group !== group) return undefined;
  return { cgroupId: event.cgroupId, group };
}

/**
 * An image layer's file and the overlay inodes of containers over it are checked in turn by one
 * access: they get one group (the layer entry's slot), and the kernel folds them into one burst.
 * `byKey` is the loader's index (`kind:major:minor:ino` → entry and HiveData), updated in place.
 */
export function foldGroups(byKey: Map<string, { entry: WatchEntry; data: HiveData[] }>): void {
  for (const [id, v] of byKey) {
    if (v.entry.kind === "file" && v.data.some(isLayerData)) v.entry = { ...v.entry, group: v.entry.slot };
    else if (id.startsWith("file:")) {
      const lower = v.data.find((d) => d.spec["image-file"])?.spec["image-file"];
      const layer =
        lower && byKey.get(`file:${lower.device.major}:${lower.device.minor}:${lower["inode-no"]}`);
      if (layer?.data.some(isLayerData)) v.entry = { ...v.entry, group: layer.entry.slot };
    }
  }
}

/**
 * What decides whether an access to an image layer's file is selected, as far as the kernel map
 * goes: each layer entry (group == slot) with its group and the HiveData behind it (by name, kind
 * and trap). Trap contents are the policies' (onPolicy clears on those).
 */
export function layerFingerprint(
  byKey: ReadonlyMap<string, { entry: WatchEntry; data: HiveData[] }>,
): string {
  const parts: string[] = [];
  for (const [id, { entry, data }] of byKey) {
    if (!entry.group || entry.group !== entry.slot) continue;
    const behind = data.map(
      (d) =>
        `${d.metadata.namespace}/${d.metadata.name}:${isLayerData(d) ? "layer" : "file"}:${d.metadata.labels?.[LABEL_TRAP_ID] ?? ""}`,
    );
    parts.push(`${id}@${entry.slot}=${behind.sort().join(",")}`);
  }
  return parts.sort().join(";");
}
