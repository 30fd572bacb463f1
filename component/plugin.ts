/**
 * HiveMonitor and HivePolicy for Python, Go, .NET and YAML: the classes the Pulumi plugin
 * (`plugin/`) serves. Pulumi reads their arguments from these declarations to write the package
 * schema, and a schema has no unions: `RegExp | string`, `number | string`, `string | { existing }`,
 * a URL or an object, `true` or an object. So the arguments here take one form each (a pattern's
 * source, octal digits, `existingNamespace` beside `namespace`, `callback: { url }`, a
 * `podMonitor`, `prometheusRule` and `grafanaDashboard` object), and are reshaped into the TypeScript arguments of args.ts, which keep
 * every form. Validation, messages and the objects created are HiveMonitor's own.
 *
 * Layout of the schema these produce: checked by test/component/plugin-schema.test.ts.
 */
import type * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import type {
  AllowArgs,
  CallbackArgs,
  GrafanaDashboardArgs,
  HiveMonitorArgs,
  MonitorTrapArgs,
  PodMonitorArgs,
  PrometheusRuleArgs,
  ReportsArgs,
  TrapArgs,
  TrapMatchArgs,
} from "./args.ts";
import { type ArgProblem, formatProblems } from "./builders/problems.ts";
import { createMonitorChildren, HIVE_MONITOR_TYPE } from "./hive-monitor.ts";
import { type HivePolicyArgs, HivePolicy as HivePolicyResource } from "./hive-policy.ts";

type Input<T> = pulumi.Input<T>;

/** Type token of the HivePolicy component (the HivePolicy object it holds is `kubernetes:hive-operator.com/v1alpha1:HivePolicy`). */
export const HIVE_POLICY_COMPONENT_TYPE = "hive:index:HivePolicy";

/** Which pods and containers a trap applies to; no filter matches every pod. */
export interface TrapMatch {
  /** Name of the pod. */
  pod?: Input<string>;
  /** Namespace of the pod. */
  namespace?: Input<string>;
  /** IPv4 address of the pod. */
  ip?: Input<string>;
  /** Regular expression matched against the whole container name, e.g. `app-.*` (no flags). */
  containerName?: Input<string>;
  /** Labels the pod must carry, all of them, with these values. */
  matchLabels?: Input<Record<string, Input<string>>>;
}

/**
 * An expected accessor of a trapped file, counted and not alerted. Decided on the executable the
 * kernel recorded; give `exe`, `parentExe` or both.
 */
export interface Allow {
  /** Absolute path of the accessing executable, e.g. `/usr/sbin/sshd`; a trailing `*` matches a prefix. */
  exe?: Input<string>;
  /** Absolute path of the parent executable, e.g. `/usr/sbin/cron`; a trailing `*` matches a prefix. */
  parentExe?: Input<string>;
  /** Allow only accesses whose kinds are all among these (read, write, exec, append, open). Default: any kind. */
  accesses?: Input<Input<string>[]>;
}

/** A file to watch inside every matched container. */
export interface Trap {
  /** Absolute path of the file inside the container, e.g. `/etc/shadow`. */
  path: Input<string>;
  /** Create the file (empty) when it does not exist. Default: false. */
  create?: Input<boolean>;
  /** Permission bits of a created file, as octal digits (`"444"`, `"0444"`). Needs `create: true`. */
  mode?: Input<string>;
  /** URL that receives this trap's alerts; default: the monitor's callback. */
  callback?: Input<string>;
  /** Access kinds that raise an alert: read, write, exec, append, open. Default: all. */
  accesses?: Input<Input<string>[]>;
  /** Alert on changes of the file (deleted, renamed, replaced, truncated) whatever `accesses` says. Default: true. */
  changes?: Input<boolean>;
  /** Which pods and containers; default: every pod. */
  match?: TrapMatch;
  /** Expected accessors, counted and not alerted (at most 64). Default: none. */
  allow?: Allow[];
  /** How urgent this trap's alerts are: `info`, `warning` or `critical`. Default: `warning`. */
  severity?: Input<string>;
  /** Labels every alert of this trap carries (e.g. `team: payments`), as Kubernetes label names and values. */
  labels?: Input<Record<string, Input<string>>>;
  /** `alert` (default) or `deny`: the kernel also refuses the access (EACCES) unless an exact `allow` entry holds. */
  action?: Input<string>;
  /** With `action: deny`: refuse nothing, alert what would have been refused. */
  dryRun?: Input<boolean>;
}

/** A trap placed by HiveMonitor into the HivePolicy named by `policy`. */
export interface MonitorTrap extends Trap {
  /** Name of the HivePolicy holding this trap; traps with the same name share one. Default: `default`. */
  policy?: string;
}

/** A key of a Secret in the monitor's namespace. */
export interface SecretKey {
  /** Name of the Secret. */
  name: Input<string>;
  /** Key inside the Secret. */
  key: Input<string>;
}

/** Where alerts go when a trap names no callback of its own. Give `url` or `urlSecret`. */
export interface Callback {
  /** http(s) URL receiving each alert as a JSON POST, kept in a Secret the agents read. A secret stays secret in the state. */
  url?: Input<string>;
  /** The URL from a Secret of yours in the monitor's namespace instead of `url` (restart the agents after changing it). */
  urlSecret?: SecretKey;
  /** A Secret in the monitor's namespace whose entries are sent as HTTP headers (e.g. `Authorization`). */
  headersSecret?: Input<string>;
  /** HMAC-SHA256 key for signing alert bodies, from a Secret in the monitor's namespace. */
  signingSecret?: SecretKey;
  /** Body the receiver understands: `json`, `cloudevents`, `alertmanager` (the URL is Alertmanager's base) or `slack`. Default: `json`. */
  format?: Input<string>;
}

/** A Prometheus Operator `PodMonitor` for the agents' metrics port (needs the monitoring.coreos.com CRDs). */
export interface PodMonitor {
  /** Scrape interval, e.g. `30s`. Default: Prometheus' own. */
  interval?: Input<string>;
  /** Labels on the PodMonitor, e.g. `release: prometheus`. */
  labels?: Input<Record<string, Input<string>>>;
}

/** A Prometheus Operator `PrometheusRule` alerting on the agents' health (needs the monitoring.coreos.com CRDs). */
export interface PrometheusRule {
  /** Labels on the PrometheusRule, e.g. `release: prometheus`. */
  labels?: Input<Record<string, Input<string>>>;
}

/** A Grafana dashboard of the agents, in a ConfigMap for Grafana's dashboard sidecar. */
export interface GrafanaDashboard {
  /** Namespace of the ConfigMap. Default: the monitor's. */
  namespace?: Input<string>;
  /** Labels the sidecar selects by; given, they replace the default. Default: `grafana_dashboard: "1"`. */
  labels?: Input<Record<string, Input<string>>>;
}

/** Findings as PolicyReports, one per namespace with selected pods. */
export interface Reports {
  /** `policyreport`, `openreports` (written when the cluster has the CRD) or `none`. Default: `policyreport`. */
  format?: string;
  /** Install the PolicyReport CRD and let every namespace's `view` role read its report. Default: false. */
  installCrd?: boolean;
  /** Hours a result stays `fail` after the last unexpected access. Default: 168 (7 days). */
  failWindowHours?: number;
}

/** How a changed DaemonSet replaces its pods. */
export interface UpdateStrategy {
  /** `RollingUpdate` or `OnDelete`. Default: `RollingUpdate`. */
  type?: Input<string>;
  /** With RollingUpdate: pods replaced at once, a number (`"1"`) or a percentage (`"10%"`). Default: 1. */
  maxUnavailable?: Input<string>;
  /** With RollingUpdate: new pods started before old ones stop, a number or a percentage. Default: 0. */
  maxSurge?: Input<string>;
}

/** HiveMonitor's arguments in the schema's shape; see HiveMonitorArgs (args.ts) for each option's meaning. */
export interface HiveMonitorSchemaArgs {
  /** The agent image, e.g. `registry.example.com/hive:0.1.0`. */
  image: Input<string>;
  /** Namespace to create for the agent, its HiveData and the monitor's HivePolicies. Default: `hive-system`. */
  namespace?: Input<string>;
  /** A namespace that exists already, used instead of creating `namespace` (it must allow privileged pods). */
  existingNamespace?: Input<string>;
  /** `Always`, `IfNotPresent` or `Never`. Default: `IfNotPresent`. */
  imagePullPolicy?: Input<string>;
  /** Names of image pull Secrets in the monitor's namespace. */
  imagePullSecrets?: Input<Input<string>[]>;
  /** Default destination of alerts. Without it (and without a trap callback) alerts go to stdout only. */
  callback?: Callback;
  /** Name of the cluster, put into every alert. Default: none. */
  clusterName?: Input<string>;
  /** URL prefixes that HivePolicies outside the monitor's namespace may name as a trap callback. */
  tenantCallbacks?: Input<Input<string>[]>;
  /** Traps, grouped into one HivePolicy per `policy` name. */
  traps?: MonitorTrap[];
  /** Extra node labels the agent's nodes must carry. */
  nodeSelector?: Input<Record<string, Input<string>>>;
  /** Tolerations of the agent pods; a list given replaces the default. Default: every taint. */
  tolerations?: Input<Input<k8s.types.input.core.v1.Toleration>[]>;
  /** Node affinity and pod (anti-)affinity of the agent pods. */
  affinity?: Input<k8s.types.input.core.v1.Affinity>;
  /** Requests and limits of the agent. Default: requests cpu 50m / memory 144Mi, limit memory 512Mi. */
  resources?: Input<k8s.types.input.core.v1.ResourceRequirements>;
  /** Extra labels on the agent pods. */
  podLabels?: Input<Record<string, Input<string>>>;
  /** Annotations on the agent pods. */
  podAnnotations?: Input<Record<string, Input<string>>>;
  /** How a changed DaemonSet replaces its pods. Default: RollingUpdate, one node at a time. */
  updateStrategy?: UpdateStrategy;
  /** PriorityClass of the agent pods; empty for the cluster default. Default: `system-node-critical`. */
  priorityClassName?: Input<string>;
  /** With a priority class outside kube-system, create the ResourceQuota that admits it there (GKE needs one). Default: true. */
  priorityClassQuota?: boolean;
  /** `debug`, `info`, `warn` or `error`. Default: `info`. */
  logLevel?: Input<string>;
  /** Port of `/metrics`, `/healthz` and `/readyz`. Default: 9464. */
  metricsPort?: Input<number>;
  /** Host path of the containerd socket. Default: `/run/containerd/containerd.sock`. */
  runtimeSocket?: Input<string>;
  /** Host directory of the alert spool. Default: `/var/lib/hive/spool`. */
  spoolDir?: Input<string>;
  /** Arm traps on the file in the node's image layers (from a container's first instruction). Default: true. */
  imageLayers?: boolean;
  /** Host path of containerd's root directory. Default: `/var/lib/containerd`. */
  containerdRoot?: Input<string>;
  /** Adds CAP_SYS_ADMIN, for kernels older than 5.8 or with neither kprobe.multi nor BPF trampolines. Default: false. */
  legacyKernelCapabilities?: Input<boolean>;
  /** The cluster's nodes may share a kernel (kind, k3d): the agents of one kernel elect its loader. Default: false. */
  sharedKernels?: boolean;
  /** Create the ValidatingAdmissionPolicy keeping each agent to its own node's HiveData (Kubernetes 1.30+). Default: true. */
  admissionPolicy?: boolean;
  /** Create a Prometheus Operator PodMonitor with these settings (`{}` for the defaults). Default: none. */
  podMonitor?: PodMonitor;
  /** Create a Prometheus Operator PrometheusRule alerting on the agents' health (`{}` for the defaults). Default: none. */
  prometheusRule?: PrometheusRule;
  /** Create a Grafana dashboard ConfigMap of the agents (`{}` for the defaults). Default: none. */
  grafanaDashboard?: GrafanaDashboard;
  /** What the traps found, as a PolicyReport per namespace (`kubectl get policyreport -A`). Default: written when the cluster has the CRD. */
  reports?: Reports;
  /** Delete the HivePolicy and HiveData CRDs on destroy (every team's HivePolicies with them). Default: false, kept. */
  deleteCrdsOnDestroy?: boolean;
}

/** HivePolicy's arguments in the schema's shape. */
export interface HivePolicySchemaArgs {
  /** Namespace of the HivePolicy object (commonly the team's own). */
  namespace: Input<string>;
  /** Name of the HivePolicy object. Default: the resource's name. */
  name?: Input<string>;
  /** The traps; at least one. */
  traps: Trap[];
  /** Extra labels on the object. */
  labels?: Input<Record<string, Input<string>>>;
}

type Loose = Record<string, unknown>;

/** `value` without its undefined entries (an engine may send them), so unknown-option checks see only what was given. */
function defined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}

/** A whole number of pods written as digits is a number to Kubernetes; a percentage stays a string. */
function intOrPercent(value: Input<string> | undefined): Input<number | string> | undefined {
  if (value === undefined) return undefined;
  const convert = (v: string) => (typeof v === "string" && /^\d+$/.test(v) ? Number(v) : v);
  return pulumi.Output.isInstance(value) || value instanceof Promise
    ? pulumi.output(value).apply(convert)
    : convert(value as string);
}

function toMatch(m: TrapMatch): TrapMatchArgs {
  return defined({ ...m });
}

function toAllow(a: Allow): AllowArgs {
  return defined({ ...a }) as AllowArgs;
}

function toTrap(t: Trap): TrapArgs {
  const out: Loose = defined({ ...t });
  if (t.match !== undefined && t.match !== null) out.match = toMatch(t.match);
  if (Array.isArray(t.allow)) out.allow = t.allow.map(toAllow);
  return out as unknown as TrapArgs;
}

function toMonitorTrap(t: MonitorTrap): MonitorTrapArgs {
  const { policy, ...trap } = t;
  return defined({ ...toTrap(trap), policy });
}

/** Problems only the schema's shape can have (HiveMonitor checks the rest, after toMonitorArgs). */
export function schemaProblems(args: HiveMonitorSchemaArgs): ArgProblem[] {
  return args?.namespace !== undefined && args.existingNamespace !== undefined
    ? [
        {
          option: "existingNamespace",
          message: "give `namespace` (created) or `existingNamespace`, not both",
        },
      ]
    : [];
}

/** The schema's arguments → HiveMonitorArgs (args.ts). Anything malformed is passed on for its checks to name. */
export function toMonitorArgs(args: HiveMonitorSchemaArgs): HiveMonitorArgs {
  const {
    existingNamespace,
    callback,
    traps,
    updateStrategy,
    podMonitor,
    prometheusRule,
    grafanaDashboard,
    reports,
    ...rest
  } = args ?? ({} as Loose);
  const out: Loose = defined({ ...rest });
  if (existingNamespace !== undefined) out.namespace = { existing: existingNamespace };
  if (callback !== undefined) out.callback = defined({ ...callback }) as CallbackArgs;
  if (Array.isArray(traps)) out.traps = traps.map(toMonitorTrap);
  else if (traps !== undefined) out.traps = traps;
  if (updateStrategy !== undefined && updateStrategy !== null) {
    const { type, maxUnavailable, maxSurge, ...other } = updateStrategy;
    const rollingUpdate = defined({
      maxUnavailable: intOrPercent(maxUnavailable),
      maxSurge: intOrPercent(maxSurge),
      ...other,
    });
    out.updateStrategy = defined({
      type,
      rollingUpdate: Object.keys(rollingUpdate).length > 0 ? rollingUpdate : undefined,
    });
  }
  if (podMonitor !== undefined && podMonitor !== null)
    out.podMonitor = defined({ ...podMonitor }) as PodMonitorArgs;
  if (prometheusRule !== undefined && prometheusRule !== null)
    out.prometheusRule = defined({ ...prometheusRule }) as PrometheusRuleArgs;
  if (grafanaDashboard !== undefined && grafanaDashboard !== null)
    out.grafanaDashboard = defined({ ...grafanaDashboard }) as GrafanaDashboardArgs;
  if (reports !== undefined && reports !== null) out.reports = defined({ ...reports }) as ReportsArgs;
  return out as unknown as HiveMonitorArgs;
}

/** The schema's arguments → HivePolicyArgs (hive-policy.ts). */
export function toPolicyArgs(args: HivePolicySchemaArgs): HivePolicyArgs {
  const out: Loose = defined({ ...(args ?? {}) });
  if (Array.isArray(args?.traps)) out.traps = args.traps.map(toTrap);
  return out as unknown as HivePolicyArgs;
}

/**
 * The agent, its CRDs, RBAC and admission policies, and the HivePolicies of `traps`: HiveMonitor
 * for Python, Go, .NET and YAML (type `hive:index:HiveMonitor`, as in TypeScript).
 */
export class HiveMonitor extends pulumi.ComponentResource {
  /** Namespace of the agent, its HiveData and the monitor's HivePolicies. */
  readonly namespace: pulumi.Output<string>;
  /** Name of the agent DaemonSet. */
  readonly daemonSetName: pulumi.Output<string>;
  /** Names of the HivePolicies built from `traps` (in the monitor's namespace). */
  readonly policyNames: pulumi.Output<string[]>;

  constructor(name: string, args: HiveMonitorSchemaArgs, opts?: pulumi.ComponentResourceOptions) {
    super(HIVE_MONITOR_TYPE, name, {}, opts);
    const problems = schemaProblems(args);
    if (problems.length > 0)
      throw new pulumi.ResourceError(
        `HiveMonitor "${name}" has invalid options:\n${formatProblems(problems)}`,
        this,
      );
    const out = createMonitorChildren(this, name, toMonitorArgs(args));
    this.namespace = out.namespace;
    this.daemonSetName = out.daemonSetName;
    this.policyNames = out.policyNames;
    this.registerOutputs({ ...out });
  }
}

/**
 * A team's traps added to a monitor someone else deployed: one HivePolicy object, for Python, Go,
 * .NET and YAML. (TypeScript programs use the HivePolicy resource of the package's main entry.)
 */
export class HivePolicy extends pulumi.ComponentResource {
  /** Namespace of the HivePolicy object. */
  readonly namespace: pulumi.Output<string>;
  /** Name of the HivePolicy object. */
  readonly policyName: pulumi.Output<string>;

  constructor(name: string, args: HivePolicySchemaArgs, opts?: pulumi.ComponentResourceOptions) {
    super(HIVE_POLICY_COMPONENT_TYPE, name, {}, opts);
    const policy = new HivePolicyResource(name, toPolicyArgs(args), { parent: this });
    this.namespace = policy.metadata.namespace.apply((ns) => ns ?? "");
    this.policyName = policy.metadata.name;
    this.registerOutputs({ namespace: this.namespace, policyName: this.policyName });
  }
}
