/**
 * The one place that turns a HiveMonitor configuration into Kubernetes objects. The Pulumi
 * component applies exactly these objects; `hive render` prints them for kubectl users.
 */
import { stringify } from "yaml";
import { HiveError } from "../runtime/errors.ts";
import type { HiveMonitorArgs } from "./args.ts";
import { admissionManifests } from "./builders/admission.ts";
import { crdManifests } from "./builders/crds.ts";
import { daemonSetManifest } from "./builders/daemonset.ts";
import { namespaceManifest } from "./builders/namespace.ts";
import type { KubernetesObject } from "./builders/objects.ts";
import { policyManifest } from "./builders/policies.ts";
import { formatProblems } from "./builders/problems.ts";
import { rbacManifests } from "./builders/rbac.ts";
import { serviceAccountManifest } from "./builders/service-account.ts";
import { type HiveConfig, resolveConfig } from "./config.ts";

/** The objects of a monitor, grouped by what must exist before what. */
export interface MonitorManifests {
  /** The Namespace, when the monitor creates it. */
  namespace: KubernetesObject | undefined;
  crds: KubernetesObject[];
  /** ServiceAccount, ClusterRole/Role and their bindings. */
  access: KubernetesObject[];
  /** The ValidatingAdmissionPolicy and its binding (none when `admissionPolicy: false`). */
  admission: KubernetesObject[];
  daemonSet: KubernetesObject;
  /** One HivePolicy per group of traps. */
  policies: KubernetesObject[];
}

/** Objects for an already validated configuration. */
export function buildManifests(config: HiveConfig): MonitorManifests {
  return {
    namespace: config.createNamespace ? namespaceManifest(config.namespace) : undefined,
    crds: crdManifests(),
    access: [serviceAccountManifest(config.namespace), ...rbacManifests(config.namespace, config.callback)],
    admission: config.admissionPolicy
      ? admissionManifests(config.namespace, config.callback?.url, config.tenantCallbacks)
      : [],
    daemonSet: daemonSetManifest(config),
    policies: config.policies.map((p) => policyManifest(p.name, config.namespace, p.spec)),
  };
}

/** In apply order: namespace and CRDs first, the HivePolicies (instances of the CRD) last. */
export function flattenManifests(m: MonitorManifests): KubernetesObject[] {
  return [
    ...(m.namespace ? [m.namespace] : []),
    ...m.crds,
    ...m.access,
    ...m.admission,
    m.daemonSet,
    ...m.policies,
  ];
}

/**
 * Every object HiveMonitor would create for `args`, in apply order. Throws a HiveError
 * (`ConfigInvalid`) listing every invalid option.
 */
export function renderManifests(args: HiveMonitorArgs): KubernetesObject[] {
  const result = resolveConfig(args);
  if (!result.ok) {
    throw new HiveError("ConfigInvalid", `invalid Hive configuration:\n${formatProblems(result.problems)}`, {
      object: "HiveMonitorArgs",
      hint: "fix the options named above",
      problems: result.problems,
    });
  }
  return flattenManifests(buildManifests(result.config));
}

/** The same objects as a multi-document YAML stream, ready for `kubectl apply -f -`. */
export function renderYaml(args: HiveMonitorArgs): string {
  return renderManifests(args)
    .map((o) => stringify(o, { lineWidth: 0 }))
    .join("---\n");
}
