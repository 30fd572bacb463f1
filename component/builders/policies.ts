import { API_VERSION, type HivePolicySpec, KIND_POLICY } from "../../api/index.ts";
import { hiveLabels, type KubernetesObject } from "./objects.ts";

/** A HivePolicy object (api/policy.ts) holding already-converted traps. */
export function policyManifest(
  name: string,
  namespace: string,
  spec: HivePolicySpec,
  labels: Record<string, string> = {},
): KubernetesObject {
  return {
    apiVersion: API_VERSION,
    kind: KIND_POLICY,
    metadata: { name, namespace, labels: { ...hiveLabels("policy"), ...labels } },
    spec,
  };
}
