/**
 * Which pods a policy's traps select on nodes without a ready Hive agent: there nothing resolves
 * their trapped files and no kernel program watches them, so the policy says so (the
 * `NodesCovered` condition, `status.podsUncovered`, hive_policy_pods_uncovered). Pure functions
 * over Pods, so the rules are tested without an API server. A node is covered when one of the
 * agent's own pods on it is Ready: the kubelet reports that (the agent's readiness checks), so no
 * agent writes anything for it.
 */
import type { V1Pod } from "@kubernetes/client-node";
import type { Condition } from "../../api/meta.ts";
import type { HivePolicy } from "../../api/policy.ts";
import { compareCodeUnits } from "../order.ts";
import { compileMatch, matchContainers, policyReachesPod } from "./match.ts";

/** Pods named in the condition's message; the count covers the rest. */
export const UNCOVERED_PODS_NAMED = 10;

export const NODES_COVERED = "NodesCovered";

/** The kubelet's Ready condition of a pod is True. */
export function isPodReady(pod: V1Pod): boolean {
  return (pod.status?.conditions ?? []).some((c) => c.type === "Ready" && c.status === "True");
}

/** The nodes on which at least one of `agentPods` is Ready. */
export function coveredNodes(agentPods: Iterable<V1Pod>): Set<string> {
  const out = new Set<string>();
  for (const pod of agentPods) {
    const node = pod.spec?.nodeName;
    if (node && !pod.metadata?.deletionTimestamp && isPodReady(pod)) out.add(node);
  }
  return out;
}

/** The nodes of `nodes` with no ready agent pod. */
export function uncoveredNodes(nodes: Iterable<string>, agentPods: Iterable<V1Pod>): Set<string> {
  const covered = coveredNodes(agentPods);
  return new Set([...nodes].filter((n) => !covered.has(n)));
}

export interface UncoveredPod {
  namespace: string;
  name: string;
  node: string;
}

/**
 * The pods of `pods` (each on a node without a ready agent) that any trap of `policy` selects:
 * the match and tenancy rules discover applies (match.ts), so the two can never disagree.
 */
export function uncoveredPodsOf(
  policy: HivePolicy,
  platformNamespace: string,
  pods: Iterable<V1Pod>,
): UncoveredPod[] {
  const compiled = policy.spec.traps.flatMap((trap) => {
    const c = compileMatch(trap);
    return c.ok ? [c.match] : [];
  });
  const out: UncoveredPod[] = [];
  for (const pod of pods) {
    if (!policyReachesPod(policy.metadata.namespace, platformNamespace, pod)) continue;
    if (!compiled.some((m) => matchContainers(m, pod).length > 0)) continue;
    out.push({
      namespace: pod.metadata?.namespace ?? "default",
      name: pod.metadata?.name ?? "",
      node: pod.spec?.nodeName ?? "",
    });
  }
  const key = (p: UncoveredPod) => `${p.node}\n${p.namespace}\n${p.name}`;
  return out.sort((a, b) => compareCodeUnits(key(a), key(b)));
}

/** The `NodesCovered` condition for these uncovered pods (kept transition time when its status holds). */
export function nodesCoveredCondition(
  policy: HivePolicy,
  uncovered: readonly UncoveredPod[],
  now: Date = new Date(),
): Condition {
  const previous = policy.status?.conditions?.find((c) => c.type === NODES_COVERED);
  const generation = policy.metadata.generation;
  const state: Condition["status"] = uncovered.length === 0 ? "True" : "False";
  const named = uncovered.slice(0, UNCOVERED_PODS_NAMED).map((p) => `${p.namespace}/${p.name} on ${p.node}`);
  const more = uncovered.length - named.length;
  return {
    type: NODES_COVERED,
    status: state,
    reason: state === "True" ? "AllNodesCovered" : "PodsOnNodesWithoutAgent",
    message:
      state === "True"
        ? "every pod the traps select runs on a node with a ready Hive agent"
        : `${uncovered.length} pods the traps select run on nodes without a ready Hive agent, so their files are not watched: ${named.join(", ")}${more > 0 ? ` and ${more} more` : ""}`,
    lastTransitionTime:
      previous && previous.status === state ? previous.lastTransitionTime : now.toISOString(),
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
  };
}
