import { hiveLabels, type KubernetesObject } from "./objects.ts";

/**
 * The agent's namespace. The agent needs hostPID, hostPath volumes and added capabilities,
 * which only Pod Security's `privileged` level admits; the label says so explicitly rather
 * than relying on the cluster's default level.
 */
export function namespaceManifest(name: string): KubernetesObject {
  return {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: {
      name,
      labels: { ...hiveLabels("agent"), "pod-security.kubernetes.io/enforce": "privileged" },
    },
  };
}
