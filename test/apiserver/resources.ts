/**
 * The resource kinds the stand-in serves: the built-in kinds Hive touches, and custom
 * resources registered from CustomResourceDefinitions (Hive's own kinds are registered up
 * front, as if their CRDs were installed).
 */

export interface ResourceDef {
  group: string;
  version: string;
  plural: string;
  kind: string;
  listKind: string;
  namespaced: boolean;
  /** PUT/PATCH on `/status` only change status; the main endpoint ignores status. */
  statusSubresource: boolean;
  /** Field selectors this kind supports besides metadata.name and metadata.namespace. */
  fields: readonly string[];
  /** openAPIV3Schema of a custom resource, when its CRD gave one (validated on writes). */
  schema?: unknown;
}

export function apiVersionOf(def: ResourceDef): string {
  return def.group === "" ? def.version : `${def.group}/${def.version}`;
}

export function resourceKey(group: string, plural: string): string {
  return `${group}/${plural}`;
}

function builtin(
  group: string,
  version: string,
  plural: string,
  kind: string,
  namespaced: boolean,
  statusSubresource: boolean,
  fields: readonly string[] = [],
): ResourceDef {
  return { group, version, plural, kind, listKind: `${kind}List`, namespaced, statusSubresource, fields };
}

const EVENT_FIELDS = [
  "involvedObject.kind",
  "involvedObject.namespace",
  "involvedObject.name",
  "involvedObject.uid",
  "involvedObject.apiVersion",
  "involvedObject.resourceVersion",
  "involvedObject.fieldPath",
  "reason",
  "reportingComponent",
  "source",
  "type",
];

export const BUILTIN_RESOURCES: readonly ResourceDef[] = [
  builtin("", "v1", "pods", "Pod", true, true, [
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
  ]),
  builtin("", "v1", "namespaces", "Namespace", false, true, ["status.phase"]),
  builtin("", "v1", "nodes", "Node", false, true, ["spec.unschedulable"]),
  builtin("", "v1", "events", "Event", true, false, EVENT_FIELDS),
  builtin("", "v1", "secrets", "Secret", true, false, ["type"]),
  builtin("", "v1", "configmaps", "ConfigMap", true, false),
  // Rendered beside the agent to admit its priority class outside kube-system (GKE).
  builtin("", "v1", "resourcequotas", "ResourceQuota", true, true),
  builtin("", "v1", "serviceaccounts", "ServiceAccount", true, false),
  builtin("coordination.k8s.io", "v1", "leases", "Lease", true, false),
  builtin("events.k8s.io", "v1", "events", "Event", true, false, [
    "reason",
    "type",
    "regarding.kind",
    "regarding.name",
    "regarding.namespace",
    "reportingController",
  ]),
  builtin("apps", "v1", "daemonsets", "DaemonSet", true, true),
  builtin("apps", "v1", "replicasets", "ReplicaSet", true, true),
  // What the stand-in authorizes and admits with (rbac.ts, admission.ts).
  builtin("rbac.authorization.k8s.io", "v1", "roles", "Role", true, false),
  builtin("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", true, false),
  builtin("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", false, false),
  builtin("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", false, false),
  builtin(
    "admissionregistration.k8s.io",
    "v1",
    "validatingadmissionpolicies",
    "ValidatingAdmissionPolicy",
    false,
    true,
  ),
  builtin(
    "admissionregistration.k8s.io",
    "v1",
    "validatingadmissionpolicybindings",
    "ValidatingAdmissionPolicyBinding",
    false,
    false,
  ),
  builtin("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", false, true),
];

/** Hive's kinds as their CRDs declare them (api/meta.ts names): namespaced, status on HivePolicy. */
export const HIVE_RESOURCES: readonly ResourceDef[] = [
  builtin("hive-operator.com", "v1alpha1", "hivepolicies", "HivePolicy", true, true),
  builtin("hive-operator.com", "v1alpha1", "hivedata", "HiveData", true, false),
];

interface CrdVersion {
  name?: string;
  served?: boolean;
  storage?: boolean;
  subresources?: { status?: unknown };
  schema?: { openAPIV3Schema?: unknown };
}

interface CrdLike {
  spec?: {
    group?: string;
    scope?: string;
    names?: { plural?: string; kind?: string; listKind?: string };
    versions?: CrdVersion[];
  };
}

/** The resource a CRD makes the server serve (its storage version), or an error message. */
export function defFromCrd(crd: unknown): ResourceDef | string {
  const spec = (crd as CrdLike).spec;
  const group = spec?.group;
  const plural = spec?.names?.plural;
  const kind = spec?.names?.kind;
  const versions = spec?.versions ?? [];
  const version = versions.find((v) => v.storage) ?? versions.find((v) => v.served) ?? versions[0];
  if (!group) return "spec.group: Required value";
  if (!plural) return "spec.names.plural: Required value";
  if (!kind) return "spec.names.kind: Required value";
  if (!version?.name)
    return "spec.versions: Invalid value: must have exactly one version marked as storage version";
  if (spec?.scope !== "Namespaced" && spec?.scope !== "Cluster") {
    return `spec.scope: Unsupported value: "${String(spec?.scope)}": supported values: "Cluster", "Namespaced"`;
  }
  const def: ResourceDef = {
    group,
    version: version.name,
    plural,
    kind,
    listKind: spec.names?.listKind ?? `${kind}List`,
    namespaced: spec.scope === "Namespaced",
    statusSubresource: version.subresources?.status !== undefined,
    fields: [],
  };
  if (version.schema?.openAPIV3Schema !== undefined) def.schema = version.schema.openAPIV3Schema;
  return def;
}
