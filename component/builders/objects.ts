/**
 * The plain Kubernetes objects the builders return: exactly what Pulumi applies and what
 * `hive render` prints. No `undefined` values anywhere, so both paths see the same object.
 */
export interface KubernetesObject {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  [field: string]: unknown;
}

/** Labels on every object Hive's component creates (`app.kubernetes.io/*` conventions). */
export function hiveLabels(component: string): Record<string, string> {
  return {
    "app.kubernetes.io/name": "hive",
    "app.kubernetes.io/part-of": "hive",
    "app.kubernetes.io/component": component,
  };
}

/** Name of the agent's ServiceAccount, Roles and bindings. */
export const AGENT_NAME = "hive-agent";

/** The username the API server gives the agent's ServiceAccount. */
export function agentUsername(namespace: string): string {
  return `system:serviceaccount:${namespace}:${AGENT_NAME}`;
}
