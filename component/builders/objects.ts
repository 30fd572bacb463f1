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

/** Who applies the objects: the Pulumi component, or whoever applies `hive render`'s output. */
export interface Identity {
  /** `app.kubernetes.io/instance`: the HiveMonitor's resource name (`hive render`: `hive`). */
  instance: string;
  /** `app.kubernetes.io/managed-by`: `pulumi`, or `hive-render` for rendered manifests. */
  managedBy: string;
}

/**
 * The Kubernetes recommended labels on `o` (and on the pod template of a workload), keeping the
 * component label a builder set (`crd` where it set none). Selectors are not touched: a
 * DaemonSet's selector is immutable, so it keeps selecting by name and component only.
 */
export function withRecommendedLabels(o: KubernetesObject, id: Identity, version: string): KubernetesObject {
  const add = (labels: Record<string, string> | undefined, component: string) => ({
    ...labels,
    "app.kubernetes.io/name": "hive",
    "app.kubernetes.io/instance": id.instance,
    "app.kubernetes.io/version": version,
    "app.kubernetes.io/component": labels?.["app.kubernetes.io/component"] ?? component,
    "app.kubernetes.io/part-of": "hive",
    "app.kubernetes.io/managed-by": id.managedBy,
  });
  const out: KubernetesObject = { ...o, metadata: { ...o.metadata, labels: add(o.metadata.labels, "crd") } };
  const spec = o.spec as { template?: { metadata?: { labels?: Record<string, string> } } } | undefined;
  if (spec?.template?.metadata) {
    const template = { ...spec.template, metadata: { ...spec.template.metadata } };
    template.metadata.labels = add(template.metadata.labels, "agent");
    out.spec = { ...spec, template };
  }
  return out;
}
