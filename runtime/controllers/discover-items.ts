/**
 * What one discover pass must resolve: every trap of every live policy × every running
 * container of this node's pods that the trap matches and the policy may reach (tenancy,
 * match.ts policyReachesPod). A matched container that is not running yet is a trap error,
 * not an item: the pod update that starts it triggers the next pass.
 */
import type { V1Pod } from "@kubernetes/client-node";
import { trapId as computeTrapId, dataName } from "../../api/ids.ts";
import type { HivePolicy } from "../../api/policy.ts";
import type { Logger } from "../log.ts";
import { compileMatch, isPodFinished, matchContainers, policyReachesPod, selectsContainer } from "./match.ts";
import type { TrapErrors } from "./trap-errors.ts";

/** One trap × one running container: one HiveData (named `name` in `namespace`). */
export interface Item {
  name: string;
  namespace: string;
  policy: HivePolicy;
  trapIndex: number;
  trapId: string;
  pod: V1Pod;
  container: { name: string; containerId: string };
}

export function collectItems(
  policies: Iterable<HivePolicy>,
  pods: Iterable<V1Pod>,
  platformNamespace: string,
  errors: TrapErrors,
  log: Logger,
): Item[] {
  const items: Item[] = [];
  const podList = [...pods];
  for (const policy of policies) {
    if (policy.metadata.deletionTimestamp) continue; // being deleted: the pods role removes its HiveData
    const ref = { namespace: policy.metadata.namespace ?? "default", name: policy.metadata.name ?? "" };
    policy.spec.traps.forEach((trap, trapIndex) => {
      const id = computeTrapId(ref, trap);
      const compiled = compileMatch(trap);
      if (!compiled.ok) {
        // Decided by the spec alone: the status writer computes it, so no node reports it.
        log.debug("trap skipped", { trapId: id, reason: compiled.reason, message: compiled.message });
        return;
      }
      for (const pod of podList) {
        if (!policyReachesPod(policy.metadata.namespace, platformNamespace, pod)) continue;
        for (const c of matchContainers(compiled.match, pod)) {
          if (!c.running || !c.containerId) {
            errors.add(policy, id, {
              reason: "ContainerNotReady",
              message: "container is not running yet",
              pod: pod.metadata?.name ?? "",
              podNamespace: pod.metadata?.namespace ?? "default",
              container: c.name,
            });
            continue;
          }
          items.push({
            name: dataName(id, c.containerId, pod.metadata?.name ?? ""),
            namespace: platformNamespace,
            policy,
            trapIndex,
            trapId: id,
            pod,
            container: { name: c.name, containerId: c.containerId },
          });
        }
      }
    });
  }
  return items;
}

/** Items grouped by container: each container is opened once per pass for all its traps. */
export function byContainer(items: readonly Item[]): Map<string, Item[]> {
  const groups = new Map<string, Item[]>();
  for (const item of items) {
    const group = groups.get(item.container.containerId);
    if (group) group.push(item);
    else groups.set(item.container.containerId, [item]);
  }
  return groups;
}

/** A trap whose file is armed in this node's image layers. */
export interface LayerTrap {
  policy: HivePolicy;
  trapIndex: number;
  trapId: string;
}

/**
 * The traps that apply to a container of a pod on this node, started or not (init containers
 * included): their files are armed in the node's image layers before the containers run. A trap
 * that applies to no pod here arms nothing here, so a tenant's trap costs only the nodes of its pods.
 */
export function collectLayerTraps(
  policies: Iterable<HivePolicy>,
  pods: Iterable<V1Pod>,
  platformNamespace: string,
): LayerTrap[] {
  const traps: LayerTrap[] = [];
  const podList = [...pods].filter((p) => !isPodFinished(p) && !p.metadata?.deletionTimestamp);
  for (const policy of policies) {
    if (policy.metadata.deletionTimestamp) continue;
    const ref = { namespace: policy.metadata.namespace ?? "default", name: policy.metadata.name ?? "" };
    policy.spec.traps.forEach((trap, trapIndex) => {
      const compiled = compileMatch(trap);
      if (!compiled.ok) return;
      const applies = podList.some(
        (pod) =>
          policyReachesPod(policy.metadata.namespace, platformNamespace, pod) &&
          [...(pod.spec?.containers ?? []), ...(pod.spec?.initContainers ?? [])].some((c) =>
            selectsContainer(compiled.match, pod, c.name),
          ),
      );
      if (applies) traps.push({ policy, trapIndex, trapId: computeTrapId(ref, trap) });
    });
  }
  return traps;
}
