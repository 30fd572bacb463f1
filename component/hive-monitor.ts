/**
 * HiveMonitor: the Pulumi component. It only wires: the objects come from render.ts (the
 * same builders `hive render` uses), and this class turns each into a Kubernetes resource
 * with the dependencies that make `pulumi up` converge in one run, and a destroy that
 * neither hangs nor takes other teams' HivePolicies down.
 */
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import type { CallbackArgs, HiveMonitorArgs, HiveMonitorValues } from "./args.ts";
import type { Identity, KubernetesObject } from "./builders/objects.ts";
import { type ArgProblem, formatProblems } from "./builders/problems.ts";
import { type HiveConfig, resolveConfig } from "./config.ts";
import { findInputs, isPending, knownProblems, type PendingInput, withValues } from "./inputs.ts";
import { buildManifests, flattenManifests, type MonitorManifests } from "./render.ts";
import { resolvedObject, resolveObjects } from "./resolve.ts";

export const HIVE_MONITOR_TYPE = "hive:index:HiveMonitor";

type Opts = pulumi.CustomResourceOptions;

/** A typed resource class; the builders' objects are plain data its constructor accepts as args. */
type ResourceClass = new (name: string, args: never, opts: Opts) => pulumi.CustomResource;

/** The typed resource class of each kind the builders make; other kinds (HivePolicy) are custom resources. */
const RESOURCE_CLASSES: Readonly<Record<string, ResourceClass>> = {
  Namespace: k8s.core.v1.Namespace,
  CustomResourceDefinition: k8s.apiextensions.v1.CustomResourceDefinition,
  ServiceAccount: k8s.core.v1.ServiceAccount,
  Secret: k8s.core.v1.Secret,
  ConfigMap: k8s.core.v1.ConfigMap,
  ResourceQuota: k8s.core.v1.ResourceQuota,
  ClusterRole: k8s.rbac.v1.ClusterRole,
  ClusterRoleBinding: k8s.rbac.v1.ClusterRoleBinding,
  Role: k8s.rbac.v1.Role,
  RoleBinding: k8s.rbac.v1.RoleBinding,
  ValidatingAdmissionPolicy: k8s.admissionregistration.v1.ValidatingAdmissionPolicy,
  ValidatingAdmissionPolicyBinding: k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding,
  DaemonSet: k8s.apps.v1.DaemonSet,
};

/** Options that decide which resources exist: they must be known when the monitor is constructed. */
const STRUCTURAL_OPTIONS = [
  /^$/,
  /^traps(\[\d+\])?$/,
  /^traps\[\d+\]\.policy$/,
  /^admissionPolicy$/,
  /^priorityClassQuota$/,
  /^podMonitor$/,
  /^prometheusRule$/,
  /^grafanaDashboard$/,
  /^reports(\..*)?$/,
  /^deleteCrdsOnDestroy$/,
];

function structuralProblems(args: HiveMonitorArgs, pending: readonly PendingInput[]): ArgProblem[] {
  const problems = pending
    .filter((p) => STRUCTURAL_OPTIONS.some((re) => re.test(p.path)))
    .map((p) => ({
      option: p.path || "(args)",
      message:
        "must be a plain value, not an Output or Promise: it decides which resources the monitor creates",
    }));
  // Whether the priority class's ResourceQuota exists depends on the class being set.
  if (args.priorityClassQuota !== false && pending.some((p) => p.path === "priorityClassName")) {
    problems.push({
      option: "priorityClassName",
      message:
        "must be a plain value while priorityClassQuota is on (an empty one creates no ResourceQuota); or set priorityClassQuota: false",
    });
  }
  return problems;
}

/**
 * The same arguments with only what decides the set of objects and their names (namespace,
 * policy names, optional objects): built before the pending values are known, for the shape.
 */
function shapeArgs(args: HiveMonitorArgs, known: HiveMonitorValues): HiveMonitorValues {
  const ns = known.namespace;
  return {
    image: "shape",
    namespace:
      typeof ns === "string" ? ns : ns && typeof ns === "object" ? { existing: ns.existing ?? "shape" } : ns,
    callback: shapeCallback(args.callback),
    admissionPolicy: args.admissionPolicy,
    priorityClassName: known.priorityClassName,
    priorityClassQuota: args.priorityClassQuota,
    podMonitor: args.podMonitor === undefined ? undefined : args.podMonitor !== false,
    prometheusRule: args.prometheusRule === undefined ? undefined : args.prometheusRule !== false,
    grafanaDashboard: args.grafanaDashboard === undefined ? undefined : args.grafanaDashboard !== false,
    reports: args.reports,
    traps: args.traps?.map((t) => ({
      path: "/shape",
      ...(t.policy === undefined ? {} : { policy: t.policy }),
    })),
  };
}

/**
 * The callback's form without its values: whether the monitor writes the URL's Secret depends
 * on which of `url` and `urlSecret` is given (the forms are plain), not on the URL.
 */
function shapeCallback(callback: HiveMonitorArgs["callback"]): HiveMonitorValues["callback"] {
  if (callback === undefined) return undefined;
  const url = "https://shape.invalid/";
  // A string, or an Output of one (`config.requireSecret`).
  if (typeof callback !== "object" || callback === null || isPending(callback)) return url;
  return (callback as CallbackArgs).urlSecret !== undefined
    ? { urlSecret: { name: "shape", key: "shape" } }
    : { url };
}

/** One Kubernetes object → the matching typed Pulumi resource, with its object as the inputs. */
function toResource(name: string, o: KubernetesObject, opts: Opts): pulumi.CustomResource {
  const Resource = RESOURCE_CLASSES[o.kind] ?? k8s.apiextensions.CustomResource;
  return new Resource(name, o as never, opts);
}

/** Logical name of a child: unique per kind and object name. */
function childName(monitor: string, o: KubernetesObject): string {
  return `${monitor}-${o.kind.toLowerCase()}-${o.metadata.name}`;
}

/** What a monitor exports. */
export interface MonitorOutputs {
  namespace: pulumi.Output<string>;
  daemonSetName: pulumi.Output<string>;
  policyNames: pulumi.Output<string[]>;
}

/**
 * Validates `args` and creates the monitor's children under `parent` (a component of type
 * HIVE_MONITOR_TYPE): HiveMonitor here, and the class the Pulumi plugin serves to other
 * languages (plugin.ts), which reshapes its arguments into these.
 */
export function createMonitorChildren(
  parent: pulumi.ComponentResource,
  name: string,
  args: HiveMonitorArgs,
): MonitorOutputs {
  const invalid = (problems: ArgProblem[]) =>
    new pulumi.ResourceError(
      `HiveMonitor "${name}" has invalid options:\n${formatProblems(problems)}`,
      parent,
    );
  // Every known option is checked before any child exists, so a typo creates nothing; the
  // values not known yet (Outputs) are checked with the same messages once they are.
  const pending = findInputs(args);
  const known = withValues(args, pending, []) as HiveMonitorValues;
  const first = resolveConfig(known);
  const problems = [
    ...structuralProblems(args, pending),
    ...(first.ok ? [] : knownProblems(first.problems, pending)),
  ];
  if (problems.length > 0) throw invalid(problems);

  const id: Identity = { instance: name, managedBy: "pulumi" };
  let config: HiveConfig;
  let m: MonitorManifests;
  /** The inputs of each object of `m`, in flattenManifests order. */
  let inputsOf: (o: KubernetesObject, index: number) => KubernetesObject;
  if (pending.length === 0 && first.ok) {
    config = first.config;
    m = buildManifests(config, id);
    inputsOf = (o) => o;
  } else {
    const shape = resolveConfig(shapeArgs(args, known));
    if (!shape.ok) throw invalid(shape.problems);
    config = shape.config;
    m = buildManifests(config, id);
    const resolved = resolveObjects(pending, (values) => {
      const result = resolveConfig(withValues(args, pending, values) as HiveMonitorValues);
      if (!result.ok) throw invalid(result.problems);
      // A namespace known only now keeps the quota decided for the shape (in kube-system too,
      // where it is redundant and harmless): the set of resources was fixed at construction.
      const quota = { priorityClassQuota: config.priorityClassQuota };
      return flattenManifests(buildManifests({ ...result.config, ...quota }, id));
    });
    inputsOf = (o, index) => resolvedObject(resolved, index, o);
  }
  const order = flattenManifests(m);
  const child = (o: KubernetesObject, options: Opts = {}, secretFields: readonly string[] = []) => {
    const inputs = { ...inputsOf(o, order.indexOf(o)) };
    for (const field of secretFields) inputs[field] = pulumi.secret(inputs[field]);
    return toResource(childName(name, o), inputs, { parent, ...options });
  };

  const ns = m.namespace ? child(m.namespace) : undefined;
  const inNamespace = ns ? [ns] : [];
  // The CRDs outlive the monitor unless told otherwise: deleting a CRD deletes every HivePolicy
  // of every team, whose finalizers no agent would remove any more (the destroy would hang).
  const crds = m.crds.map((o) => child(o, { retainOnDelete: !config.deleteCrdsOnDestroy }));
  const access = m.access.map((o) => child(o, { dependsOn: inNamespace }));
  // The URL is secret in the state whatever its input was: a URL often carries a token.
  const callbackSecret = m.callbackSecret
    ? [child(m.callbackSecret, { dependsOn: inNamespace }, ["stringData"])]
    : [];
  const admission = m.admission.map((o) => child(o));
  // Where the cluster limits the priority class, the quota must exist before any agent pod.
  const quota = m.priorityQuota ? [child(m.priorityQuota, { dependsOn: inNamespace })] : [];
  // The agent starts only once it may do its job (RBAC) and may not overstep it (admission),
  // once the kinds it watches exist, and once its callback's Secret does (the kubelet waits for it).
  const daemonSet = child(m.daemonSet, {
    dependsOn: [...inNamespace, ...crds, ...access, ...callbackSecret, ...admission, ...quota],
  }) as k8s.apps.v1.DaemonSet;
  // Policies depend on the agent so that `pulumi destroy` deletes them while the agent still
  // runs to remove its finalizer (dependents are deleted first); otherwise deletion would hang.
  const policies = m.policies.map(
    (o) => child(o, { dependsOn: [...inNamespace, ...crds, daemonSet] }) as k8s.apiextensions.CustomResource,
  );
  // The monitoring objects go with the agent they watch (deleted before it on destroy).
  for (const o of [m.podMonitor, m.prometheusRule, m.grafanaDashboard])
    if (o) child(o, { dependsOn: [...inNamespace, daemonSet] });

  const nsArg = args.namespace;
  return {
    namespace: ns
      ? (ns as k8s.core.v1.Namespace).metadata.name
      : pulumi.output(
          nsArg !== null && typeof nsArg === "object" && "existing" in nsArg
            ? nsArg.existing
            : config.namespace,
        ),
    daemonSetName: daemonSet.metadata.name,
    policyNames: pulumi.all(policies.map((p) => p.metadata.name)),
  };
}

export class HiveMonitor extends pulumi.ComponentResource {
  /** Namespace of the agent, its HiveData and the monitor's HivePolicies. */
  readonly namespace: pulumi.Output<string>;
  /** Name of the agent DaemonSet. */
  readonly daemonSetName: pulumi.Output<string>;
  /** Names of the HivePolicies built from `traps` (in the monitor's namespace). */
  readonly policyNames: pulumi.Output<string[]>;

  constructor(name: string, args: HiveMonitorArgs, opts?: pulumi.ComponentResourceOptions) {
    super(HIVE_MONITOR_TYPE, name, {}, opts);
    const out = createMonitorChildren(this, name, args);
    this.namespace = out.namespace;
    this.daemonSetName = out.daemonSetName;
    this.policyNames = out.policyNames;
    this.registerOutputs({ ...out });
  }
}
