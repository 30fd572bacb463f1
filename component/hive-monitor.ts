/**
 * HiveMonitor: the Pulumi component. It only wires: the objects come from render.ts (the
 * same builders `hive render` uses), and this class turns each into a Kubernetes resource
 * with the dependencies that make `pulumi up` converge in one run.
 */
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import type { HiveMonitorArgs } from "./args.ts";
import type { KubernetesObject } from "./builders/objects.ts";
import { formatProblems } from "./builders/problems.ts";
import { resolveConfig } from "./config.ts";
import { buildManifests } from "./render.ts";

export const HIVE_MONITOR_TYPE = "hive:index:HiveMonitor";

type Opts = pulumi.CustomResourceOptions;

/** A typed resource class; the builders' objects are plain data its constructor accepts as args. */
type ResourceClass = new (name: string, args: never, opts: Opts) => pulumi.CustomResource;

/** The typed resource class of each kind the builders make; other kinds (HivePolicy) are custom resources. */
const RESOURCE_CLASSES: Readonly<Record<string, ResourceClass>> = {
  Namespace: k8s.core.v1.Namespace,
  CustomResourceDefinition: k8s.apiextensions.v1.CustomResourceDefinition,
  ServiceAccount: k8s.core.v1.ServiceAccount,
  ClusterRole: k8s.rbac.v1.ClusterRole,
  ClusterRoleBinding: k8s.rbac.v1.ClusterRoleBinding,
  Role: k8s.rbac.v1.Role,
  RoleBinding: k8s.rbac.v1.RoleBinding,
  ValidatingAdmissionPolicy: k8s.admissionregistration.v1.ValidatingAdmissionPolicy,
  ValidatingAdmissionPolicyBinding: k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding,
  DaemonSet: k8s.apps.v1.DaemonSet,
};

/** One Kubernetes object → the matching typed Pulumi resource, with its object as the inputs. */
function toResource(name: string, o: KubernetesObject, opts: Opts): pulumi.CustomResource {
  const Resource = RESOURCE_CLASSES[o.kind] ?? k8s.apiextensions.CustomResource;
  return new Resource(name, o as never, opts);
}

/** Logical name of a child: unique per kind and object name. */
function childName(monitor: string, o: KubernetesObject): string {
  return `${monitor}-${o.kind.toLowerCase()}-${o.metadata.name}`;
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
    // Every option is checked before any child exists, so a typo creates nothing.
    const result = resolveConfig(args);
    if (!result.ok) {
      throw new pulumi.ResourceError(
        `HiveMonitor "${name}" has invalid options:\n${formatProblems(result.problems)}`,
        this,
      );
    }
    const m = buildManifests(result.config);
    const child = (o: KubernetesObject, dependsOn: pulumi.Resource[] = []) =>
      toResource(childName(name, o), o, { parent: this, dependsOn });

    const ns = m.namespace ? child(m.namespace) : undefined;
    const inNamespace = ns ? [ns] : [];
    const crds = m.crds.map((o) => child(o));
    const access = m.access.map((o) => child(o, inNamespace));
    const admission = m.admission.map((o) => child(o));
    // The agent starts only once it may do its job (RBAC) and may not overstep it (admission),
    // and once the kinds it watches exist.
    const daemonSet = child(m.daemonSet, [
      ...inNamespace,
      ...crds,
      ...access,
      ...admission,
    ]) as k8s.apps.v1.DaemonSet;
    // Policies depend on the agent so that `pulumi destroy` deletes them while the agent still
    // runs to remove its finalizer (dependents are deleted first); otherwise deletion would hang.
    const policies = m.policies.map(
      (o) => child(o, [...inNamespace, ...crds, daemonSet]) as k8s.apiextensions.CustomResource,
    );

    this.namespace = ns
      ? (ns as k8s.core.v1.Namespace).metadata.name
      : pulumi.output(result.config.namespace);
    this.daemonSetName = daemonSet.metadata.name;
    this.policyNames = pulumi.all(policies.map((p) => p.metadata.name));
    this.registerOutputs({
      namespace: this.namespace,
      daemonSetName: this.daemonSetName,
      policyNames: this.policyNames,
    });
  }
}
