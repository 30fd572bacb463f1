import { AGENT_NAME, hiveLabels, type KubernetesObject } from "./objects.ts";

/** The agent's identity; its token (bound to the pod, carrying the node name) is what admission checks. */
export function serviceAccountManifest(namespace: string): KubernetesObject {
  return {
    apiVersion: "v1",
    kind: "ServiceAccount",
    metadata: { name: AGENT_NAME, namespace, labels: hiveLabels("agent") },
  };
}
