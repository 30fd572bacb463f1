import { AGENT_NAME, hiveLabels, type KubernetesObject } from "./objects.ts";

/** The namespace where every cluster admits the critical priority classes without a quota. */
export const SYSTEM_NAMESPACE = "kube-system";

/**
 * Pods large enough for every node of any cluster (GKE's own quota in kube-system allows 1G):
 * the quota exists to be *present*, not to limit the DaemonSet.
 */
const QUOTA_PODS = "1G";

/**
 * A ResourceQuota admitting pods of `priorityClassName` in the agent's namespace. Clusters that
 * limit the critical priority classes to kube-system (GKE does, through the API server's
 * ResourceQuota admission configuration) refuse such pods elsewhere unless a quota with a
 * PriorityClass scope naming the class exists in their namespace; without it the DaemonSet
 * would run no pod at all, silently.
 */
export function priorityQuotaManifest(namespace: string, priorityClassName: string): KubernetesObject {
  return {
    apiVersion: "v1",
    kind: "ResourceQuota",
    metadata: { name: `${AGENT_NAME}-priority`, namespace, labels: hiveLabels("agent") },
    spec: {
      hard: { pods: QUOTA_PODS },
      scopeSelector: {
        matchExpressions: [{ scopeName: "PriorityClass", operator: "In", values: [priorityClassName] }],
      },
    },
  };
}
