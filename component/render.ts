/**
 * The one place that turns a HiveMonitor configuration into Kubernetes objects. The Pulumi
 * component applies exactly these objects; `hive render` prints them for kubectl users.
 */
import { stringify } from "yaml";
import { HiveError } from "../api/errors.ts";
import { PACKAGE_VERSION } from "../api/version.ts";
import type { HiveMonitorArgs, HiveMonitorValues } from "./args.ts";
import { admissionManifests } from "./builders/admission.ts";
import { callbackSecretManifest } from "./builders/callback-secret.ts";
import { crdManifests } from "./builders/crds.ts";
import { daemonSetManifest } from "./builders/daemonset.ts";
import { grafanaDashboardManifest } from "./builders/grafana-dashboard.ts";
import { namespaceManifest } from "./builders/namespace.ts";
import { type Identity, type KubernetesObject, withRecommendedLabels } from "./builders/objects.ts";
import { podMonitorManifest } from "./builders/pod-monitor.ts";
import { policyManifest } from "./builders/policies.ts";
import { formatProblems } from "./builders/problems.ts";
import { prometheusRuleManifest } from "./builders/prometheus-rule.ts";
import { rbacManifests, reportReaderRole } from "./builders/rbac.ts";
import { priorityQuotaManifest } from "./builders/resource-quota.ts";
import { serviceAccountManifest } from "./builders/service-account.ts";
import { type HiveConfig, resolveConfig } from "./config.ts";
import { findInputs } from "./inputs.ts";

/** The objects of a monitor, grouped by what must exist before what. */
export interface MonitorManifests {
  /** The Namespace, when the monitor creates it. */
  namespace: KubernetesObject | undefined;
  crds: KubernetesObject[];
  /** ServiceAccount, ClusterRole/Role and their bindings. */
  access: KubernetesObject[];
  /** The Secret holding the callback URL, when the monitor writes it (`callback.url`). */
  callbackSecret: KubernetesObject | undefined;
  /** The ValidatingAdmissionPolicy and its binding (none when `admissionPolicy: false`). */
  admission: KubernetesObject[];
  /** The ResourceQuota admitting the agent's priority class in its namespace, when needed. */
  priorityQuota: KubernetesObject | undefined;
  daemonSet: KubernetesObject;
  /** One HivePolicy per group of traps. */
  policies: KubernetesObject[];
  /** The Prometheus Operator PodMonitor, when `podMonitor` asks for one. */
  podMonitor: KubernetesObject | undefined;
  /** The Prometheus Operator PrometheusRule, when `prometheusRule` asks for one. */
  prometheusRule: KubernetesObject | undefined;
  /** The Grafana dashboard's ConfigMap, when `grafanaDashboard` asks for one. */
  grafanaDashboard: KubernetesObject | undefined;
}

/** The identity of rendered manifests (`hive render`, `renderManifests`). */
export const RENDER_IDENTITY: Identity = { instance: "hive", managedBy: "hive-render" };

/** Objects for an already validated configuration, each with the recommended labels. */
export function buildManifests(config: HiveConfig, id: Identity = RENDER_IDENTITY): MonitorManifests {
  const label = (o: KubernetesObject) => withRecommendedLabels(o, id, PACKAGE_VERSION);
  const optional = (o: KubernetesObject | undefined) => (o ? label(o) : undefined);
  return {
    namespace: config.createNamespace ? label(namespaceManifest(config.namespace)) : undefined,
    crds: crdManifests(config.reports?.installCrd ? config.reports.format : undefined).map(label),
    access: [
      serviceAccountManifest(config.namespace),
      ...rbacManifests(config.namespace, config.callback, config.reports?.format),
      ...(config.reports?.installCrd ? [reportReaderRole(config.reports.format)] : []),
    ].map(label),
    callbackSecret: optional(callbackSecretManifest(config.namespace, config.callback)),
    admission: config.admissionPolicy
      ? admissionManifests(config.namespace, config.tenantCallbacks).map(label)
      : [],
    priorityQuota: optional(
      config.priorityClassQuota && config.priorityClassName
        ? priorityQuotaManifest(config.namespace, config.priorityClassName)
        : undefined,
    ),
    daemonSet: label(daemonSetManifest(config)),
    policies: config.policies.map((p) => label(policyManifest(p.name, config.namespace, p.spec))),
    podMonitor: optional(config.podMonitor && podMonitorManifest(config.namespace, config.podMonitor)),
    prometheusRule: optional(
      config.prometheusRule && prometheusRuleManifest(config.namespace, config.prometheusRule),
    ),
    grafanaDashboard: optional(
      config.grafanaDashboard && grafanaDashboardManifest(config.namespace, config.grafanaDashboard),
    ),
  };
}

/** In apply order: namespace and CRDs first, the HivePolicies (instances of the CRD) last. */
export function flattenManifests(m: MonitorManifests): KubernetesObject[] {
  return [
    ...(m.namespace ? [m.namespace] : []),
    ...m.crds,
    ...m.access,
    ...(m.callbackSecret ? [m.callbackSecret] : []),
    ...m.admission,
    ...(m.priorityQuota ? [m.priorityQuota] : []),
    m.daemonSet,
    ...m.policies,
    ...(m.podMonitor ? [m.podMonitor] : []),
    ...(m.prometheusRule ? [m.prometheusRule] : []),
    ...(m.grafanaDashboard ? [m.grafanaDashboard] : []),
  ];
}

/**
 * Every object HiveMonitor would create for `args` (plain values: an Output has no value to
 * print), in apply order. Throws a HiveError (`ConfigInvalid`) listing every invalid option.
 */
export function renderManifests(
  args: HiveMonitorArgs | HiveMonitorValues,
  id?: Identity,
): KubernetesObject[] {
  const outputs = findInputs(args);
  if (outputs.length > 0) {
    const problems = outputs.map((i) => ({
      option: i.path,
      message: "is a Pulumi Output or Promise; rendering needs plain values",
    }));
    throw new HiveError("ConfigInvalid", `invalid Hive configuration:\n${formatProblems(problems)}`, {
      object: "HiveMonitorArgs",
      hint: "pass plain values (read them from a file, as `hive render --config` does)",
      problems,
    });
  }
  const result = resolveConfig(args as HiveMonitorValues);
  if (!result.ok) {
    throw new HiveError("ConfigInvalid", `invalid Hive configuration:\n${formatProblems(result.problems)}`, {
      object: "HiveMonitorArgs",
      hint: "fix the options named above",
      problems: result.problems,
    });
  }
  return flattenManifests(buildManifests(result.config, id));
}

/**
 * Which objects to print. kubectl maps every document of a stream to a served resource before
 * it writes the first one, so on a new cluster a stream holding both the CRDs and HivePolicies
 * fails on the HivePolicies whatever the order: apply `crds` first, then `without-crds`.
 */
export type RenderPart = "all" | "crds" | "without-crds";

const isCrd = (o: KubernetesObject) => o.kind === "CustomResourceDefinition";

/** The same objects (or one part of them) as a multi-document YAML stream for `kubectl apply -f -`. */
export function renderYaml(args: HiveMonitorArgs | HiveMonitorValues, part: RenderPart = "all"): string {
  return renderManifests(args)
    .filter((o) => part === "all" || (part === "crds") === isCrd(o))
    .map((o) => stringify(o, { lineWidth: 0 }))
    .join("---\n");
}
