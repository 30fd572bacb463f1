/**
 * The typed surface of the component: what a platform engineer writes in a Pulumi program
 * (and, as plain values, what `hive render --config` reads). Idiomatic TypeScript, camelCase;
 * the builders map it onto the resource fields of api/ (`container-name`, octal `mode` strings…).
 *
 * Every leaf takes a `pulumi.Input`: the image often comes from an image build in the same
 * program, a callback URL from `config.requireSecret`. Known values are validated before any
 * child is created; values known only later are validated when they resolve, with the same
 * messages. Lists and the options that decide which resources exist (`namespace`'s form,
 * `traps[].policy`, `admissionPolicy`, `priorityClassQuota`, `podMonitor`, `prometheusRule`,
 * `grafanaDashboard`, `reports`, `deleteCrdsOnDestroy`) are plain.
 * `HiveMonitorValues` is the same surface with plain values only (`hive render`).
 */
import type * as k8s from "@pulumi/kubernetes";
import type * as pulumi from "@pulumi/pulumi";
import type { AccessKind, CallbackFormat, Severity, TrapAction } from "../api/index.ts";

type Input<T> = pulumi.Input<T>;

/** `T` with every `pulumi.Input` resolved: the plain values `hive render` reads and the builders take. */
export type Plain<T> = T extends pulumi.OutputInstance<infer U> | Promise<infer U>
  ? Plain<U>
  : T extends RegExp | string | number | boolean | null | undefined
    ? T
    : T extends readonly (infer E)[]
      ? Plain<E>[]
      : { [K in keyof T]: Plain<T[K]> };

export type LogLevel = "debug" | "info" | "warn" | "error";
export type PullPolicy = "Always" | "IfNotPresent" | "Never";

/** Which pods and containers a trap applies to; no filter matches every pod. */
export interface TrapMatchArgs {
  /** Name of the pod. */
  pod?: Input<string>;
  /** Namespace of the pod. */
  namespace?: Input<string>;
  /** IPv4 address of the pod. */
  ip?: Input<string>;
  /**
   * Container names to watch, matched against the whole name. A RegExp's `source` is used;
   * flags are not supported (the agent compiles the pattern without flags).
   */
  containerName?: Input<RegExp | string>;
  /** Labels the pod must carry, all of them, with these values. */
  matchLabels?: Input<Record<string, Input<string>>>;
}

/**
 * An expected accessor of a trapped file: an access matching every field given raises no
 * alert and is counted instead. Decided on the executable the kernel recorded (inside the
 * container), never on the process name; an executable the kernel did not know is never
 * allowed. Give `exe`, `parentExe` or both.
 */
export interface AllowArgs {
  /** Absolute path of the accessing executable, e.g. `/usr/sbin/sshd`; a trailing `*` matches a prefix. */
  exe?: Input<string>;
  /** Absolute path of the accessing process's parent executable, e.g. `/usr/sbin/cron`; a trailing `*` matches a prefix. */
  parentExe?: Input<string>;
  /** Allow only accesses whose kinds are all among these. Default: any kind. */
  accesses?: Input<Input<AccessKind>[]>;
}

/** A file to watch inside every matched container. */
export interface TrapArgs {
  /** Absolute path of the file inside the container, e.g. `/etc/shadow`. */
  path: Input<string>;
  /** Create the file (empty) when it does not exist. Default: false. */
  create?: Input<boolean>;
  /**
   * Permission bits of a created file. A number is the bits themselves (write `0o444`);
   * a string is octal digits as in the reference design (`"444"`, `"0444"`). Needs `create: true`.
   */
  mode?: Input<number | string>;
  /** URL that receives this trap's alerts; default: the monitor's callback. */
  callback?: Input<string>;
  /** Access kinds that raise an alert. Default: all (read, write, exec, append, open). */
  accesses?: Input<Input<AccessKind>[]>;
  /**
   * Alert on changes of the file (deleted, renamed away, replaced by a rename, truncated) whatever
   * `accesses` says. Default: true; false still follows the file to its new identity.
   */
  changes?: Input<boolean>;
  match?: TrapMatchArgs;
  /** Expected accessors, counted and not alerted (at most 64). Default: none, every access alerts. */
  allow?: AllowArgs[];
  /** How urgent this trap's alerts are: `info`, `warning` or `critical`. Default: `warning`. */
  severity?: Input<Severity>;
  /** Labels every alert of this trap carries (e.g. `{ team: "payments" }`), as Kubernetes label names and values (at most 32). */
  labels?: Input<Record<string, Input<string>>>;
  /**
   * `deny`: the kernel also refuses the access (EACCES) in each selected container once its own
   * file is armed, unless one of `allow`'s entries holds (exact paths only, at most 32: the kernel
   * decides them at the access). Default: `alert`.
   */
  action?: Input<TrapAction>;
  /** With `action: "deny"`: refuse nothing, alert what would have been refused. */
  dryRun?: Input<boolean>;
}

/** A trap placed by HiveMonitor into a HivePolicy named by `policy`. */
export interface MonitorTrapArgs extends TrapArgs {
  /**
   * Name of the HivePolicy holding this trap; traps with the same name share one. Plain (not an
   * Input): it decides which HivePolicy resources exist. Default: `"default"`.
   */
  policy?: string;
}

export interface SecretKeyRef {
  /** Secret in the monitor's namespace. */
  name: Input<string>;
  /** Key inside the Secret. */
  key: Input<string>;
}

/** Where alerts go when a trap names no callback of its own. Give `url` or `urlSecret`. */
export interface CallbackArgs {
  /**
   * http(s) URL receiving each alert as a JSON POST. The monitor writes it into a Secret
   * (`hive-agent-callback`) that the agents read through their environment; a secret Output
   * stays secret in the state.
   */
  url?: Input<string>;
  /**
   * The URL from a Secret of yours in the monitor's namespace instead of `url`. The agents read
   * it when they start: restart them (`kubectl rollout restart`) after changing it.
   */
  urlSecret?: SecretKeyRef;
  /** A Secret in the monitor's namespace whose entries are sent as HTTP headers (e.g. `Authorization`). */
  headersSecret?: Input<string>;
  /** HMAC-SHA256 key for signing alert bodies, from a Secret in the monitor's namespace. */
  signingSecret?: SecretKeyRef;
  /**
   * The body the receiver understands: `json` (the alert itself), `cloudevents` (a CloudEvents 1.0
   * structured event), `alertmanager` (Alertmanager's v2 API: the URL is its base, e.g.
   * `http://alertmanager.monitoring:9093`, and alerts are POSTed to `/api/v2/alerts` under it) or
   * `slack` (a Slack-compatible incoming-webhook message). Applies to the URLs under the callback's
   * origin. Default: `json`.
   */
  format?: Input<CallbackFormat>;
}

/** Pod tolerations, as in a pod spec (`@pulumi/kubernetes`' own type). */
export type Toleration = k8s.types.input.core.v1.Toleration;
/** Requests and limits of the agent container, as in a pod spec. */
export type ResourceRequirements = k8s.types.input.core.v1.ResourceRequirements;
/** Node and pod affinity of the agent pods, as in a pod spec. */
export type Affinity = k8s.types.input.core.v1.Affinity;
/** How a changed DaemonSet replaces its pods, as in a DaemonSet spec. */
export type DaemonSetUpdateStrategy = k8s.types.input.apps.v1.DaemonSetUpdateStrategy;

/** A Prometheus Operator `PodMonitor` (monitoring.coreos.com/v1) scraping the agents' metrics port. */
export interface PodMonitorArgs {
  /** Scrape interval, e.g. `"30s"`. Default: Prometheus' own. */
  interval?: Input<string>;
  /** Labels on the PodMonitor, e.g. those your Prometheus' `podMonitorSelector` selects (`release: prometheus`). */
  labels?: Input<Record<string, Input<string>>>;
}

/** A Prometheus Operator `PrometheusRule` (monitoring.coreos.com/v1) alerting on the agents' own health. */
export interface PrometheusRuleArgs {
  /** Labels on the PrometheusRule, e.g. those your Prometheus' `ruleSelector` selects (`release: prometheus`). */
  labels?: Input<Record<string, Input<string>>>;
}

/** A Grafana dashboard of the agents, in a ConfigMap for Grafana's dashboard sidecar. */
export interface GrafanaDashboardArgs {
  /** Namespace of the ConfigMap, e.g. where your Grafana's sidecar looks. Default: the monitor's. */
  namespace?: Input<string>;
  /** Labels the sidecar selects by; given, they replace the default. Default: `grafana_dashboard: "1"`. */
  labels?: Input<Record<string, Input<string>>>;
}

/** Findings as PolicyReports (`wgpolicyk8s.io/v1alpha2`), one per namespace with selected pods. */
export interface ReportsArgs {
  /**
   * `policyreport` (`wgpolicyk8s.io/v1alpha2` PolicyReport), `openreports` (`openreports.io/v1alpha1`
   * Report, its successor) or `none`. Written when the cluster has the CRD. Default: `policyreport`.
   */
  format?: "policyreport" | "openreports" | "none";
  /**
   * Install the PolicyReport CRD (for clusters without Kyverno or Policy Reporter, which bring
   * it) and let every namespace's `view` role read its report. Default: false.
   */
  installCrd?: boolean;
  /** Hours a result stays `fail` after the last unexpected access, then `pass` again. Default: 168 (7 days). */
  failWindowHours?: number;
}

export interface HiveMonitorArgs {
  /**
   * Namespace of the agent, its HiveData and the monitor's HivePolicies. A string creates the
   * namespace; `{ existing: "name" }` uses one that exists (it must allow privileged pods).
   * Default: `"hive-system"`, created.
   */
  namespace?: Input<string> | { existing: Input<string> };
  /**
   * The agent image (built from this repository's Dockerfile), e.g. `registry.example.com/hive:0.1.0`,
   * or the Output of an image build in the same program.
   */
  image: Input<string>;
  /** Default: `IfNotPresent`. */
  imagePullPolicy?: Input<PullPolicy>;
  /** Names of image pull Secrets in the monitor's namespace. */
  imagePullSecrets?: Input<Input<string>[]>;
  /**
   * Default destination of alerts: a URL (`"https://alerts.example.com/hive"`, short for `{ url }`)
   * or `{ url | urlSecret, headersSecret?, signingSecret?, format? }`. Without it (and without a trap
   * callback) alerts go to stdout only. The URL reaches the agents from a Secret, never from
   * their arguments or an admission policy; a secret URL (`config.requireSecret`) stays secret.
   */
  callback?: Input<string> | CallbackArgs;
  /**
   * Name of the cluster, put into every alert (`cluster.name`, Alertmanager's `cluster` label, the
   * Slack text), so that receivers serving several clusters tell them apart. Letters, digits,
   * `-`, `_` and `.`, at most 63. Default: none.
   */
  clusterName?: Input<string>;
  /**
   * URL prefixes that HivePolicies outside the monitor's namespace (tenants') may name as a
   * trap `callback`, e.g. `https://alerts.example.com/teams/`, compared by path segment with the
   * URL as it is sent. A tenant trap naming another URL is rejected at admission, and the agent
   * never contacts it (its alerts go to the monitor's callback, as those of a tenant trap
   * without callback do). Default: none.
   */
  tenantCallbacks?: Input<Input<string>[]>;
  /** Traps, grouped into one HivePolicy per `policy` name. */
  traps?: MonitorTrapArgs[];
  /** Extra node labels the agent's nodes must carry (`kubernetes.io/os: linux` is always set, and node affinity keeps it to `kubernetes.io/arch` amd64 or arm64; `kubernetes.io/arch` here may narrow that to one). */
  nodeSelector?: Input<Record<string, Input<string>>>;
  /**
   * Taints the agent tolerates. Default: every taint (`[{ operator: "Exists" }]`), so that no
   * node, control plane and dedicated pools included, goes unwatched. A list given replaces the
   * default: e.g. `[{ key: "node-role.kubernetes.io/control-plane", operator: "Exists" }]` keeps
   * the agent off every other tainted node.
   */
  tolerations?: Input<Input<Toleration>[]>;
  /** Node affinity and pod (anti-)affinity of the agent pods. Default: none. */
  affinity?: Input<Affinity>;
  /** Default: requests cpu 50m / memory 144Mi (the agent idles at about 104–131 MiB RSS), limit memory 512Mi. */
  resources?: Input<ResourceRequirements>;
  /** Extra labels on the agent pods (not on their selector). Default: none. */
  podLabels?: Input<Record<string, Input<string>>>;
  /** Annotations on the agent pods. Default: none. */
  podAnnotations?: Input<Record<string, Input<string>>>;
  /** How a changed DaemonSet replaces its pods. Default: `RollingUpdate`, one node at a time (`maxUnavailable: 1`). */
  updateStrategy?: Input<DaemonSetUpdateStrategy>;
  /**
   * Default: `system-node-critical`: a security agent should be the last pod a node evicts
   * under pressure. An empty string leaves the cluster's default priority.
   */
  priorityClassName?: Input<string>;
  /**
   * With a `priorityClassName` and a namespace other than kube-system, create a ResourceQuota
   * admitting pods of that class in the namespace: GKE (and any cluster limiting the critical
   * classes to kube-system) refuses the agent's pods without one. Plain: it decides which
   * resources exist (so `priorityClassName` must be plain while it is on). Default: true.
   */
  priorityClassQuota?: boolean;
  /** Default: `info`. */
  logLevel?: Input<LogLevel>;
  /** Port of `/metrics`, `/healthz` and `/readyz`. Default: 9464. */
  metricsPort?: Input<number>;
  /** Host path of the containerd socket. Default: `/run/containerd/containerd.sock` (k3s: `/run/k3s/containerd/containerd.sock`). */
  runtimeSocket?: Input<string>;
  /** Host directory of the alert spool (alerts not delivered yet survive restarts there). Default: `/var/lib/hive/spool`. */
  spoolDir?: Input<string>;
  /**
   * Arm traps on the file in the node's image layers, so they hold from a container's first
   * instruction (the agent reads containerd's overlayfs snapshots and the host's cgroup tree,
   * read-only). Without it a trap is armed once its container runs and discover has resolved it.
   * Default: true.
   */
  imageLayers?: boolean;
  /** Host path of containerd's root directory (image layers). Default: `/var/lib/containerd` (k3s: `/var/lib/rancher/k3s/agent/containerd`). */
  containerdRoot?: Input<string>;
  /**
   * Adds CAP_SYS_ADMIN, for two kinds of node kernels only: older than 5.8 (no CAP_BPF and
   * CAP_PERFMON: bpf() demands CAP_SYS_ADMIN), and kernels with neither kprobe.multi links
   * (5.18+ with CONFIG_FPROBE) nor BPF trampolines (fentry), where only a perf-event kprobe
   * can attach and Debian's and Ubuntu's perf_event_paranoid patch reserves perf_event_open
   * to CAP_SYS_ADMIN. Current kernels need neither (the agent reports PermissionDenied with
   * this option named when they do). Default: false.
   */
  legacyKernelCapabilities?: Input<boolean>;
  /**
   * The cluster's nodes may share a kernel: nodes that are containers on one host, as kind's and
   * k3d's. The agents of one kernel then elect one loader through the kernel's Lease, and another
   * node's report of the kernel it runs (its Node's boot id, which a node writes for itself) is
   * believed: a compromised node of such a cluster can claim another node's kernel
   * (docs/security-model.md). Off, a node's agent loads its own kernel and no other node ever acts
   * for it; a node claiming its boot id is logged as a conflict. Default: false.
   */
  sharedKernels?: boolean;
  /**
   * Create the ValidatingAdmissionPolicy that keeps each agent to its own node's HiveData.
   * It needs admissionregistration.k8s.io/v1 and the node name in service-account tokens
   * (Kubernetes 1.30 or later). Turn it off only for older clusters: a compromised node could
   * then forge or delete the HiveData of every node. Plain: it decides which resources exist.
   * Default: true.
   */
  admissionPolicy?: boolean;
  /**
   * Create a Prometheus Operator `PodMonitor` for the agents' metrics port: `true`, or its
   * settings. Needs the monitoring.coreos.com CRDs in the cluster. Plain. Default: none.
   */
  podMonitor?: boolean | PodMonitorArgs;
  /**
   * Create a Prometheus Operator `PrometheusRule` alerting on the agents' health (not ready,
   * restarting, kernel events lost or dropped, files not watched, spool filling or not
   * writable, deliveries failing, alerts dropped): `true`, or its settings. Its expressions
   * select the monitor's namespace by the `namespace` label a PodMonitor gives (`podMonitor`).
   * Needs the monitoring.coreos.com CRDs. Plain. Default: none.
   */
  prometheusRule?: boolean | PrometheusRuleArgs;
  /**
   * Create a Grafana dashboard of the agents (a ConfigMap for Grafana's dashboard sidecar):
   * `true`, or its settings. Plain. Default: none.
   */
  grafanaDashboard?: boolean | GrafanaDashboardArgs;
  /**
   * What the traps found, as a PolicyReport per namespace (`kubectl get policyreport -A`):
   * `"policyreport"`, `"openreports"` (written when the cluster has the CRD), the settings, or
   * `"none"`. Plain. Default: `"policyreport"`.
   */
  reports?: "policyreport" | "openreports" | "none" | ReportsArgs;
  /**
   * Delete the HivePolicy and HiveData CRDs on `pulumi destroy`. Deleting a CRD deletes every
   * HivePolicy of every team in the cluster, so by default the CRDs stay (Pulumi forgets them).
   * Plain: it is a resource option. Default: false.
   */
  deleteCrdsOnDestroy?: boolean;
}

/** HiveMonitorArgs as plain values: what `hive render --config` reads and `resolveConfig` checks. */
export type HiveMonitorValues = Plain<HiveMonitorArgs>;
export type CallbackValues = Plain<CallbackArgs>;
export type TrapValues = Plain<TrapArgs>;
export type MonitorTrapValues = Plain<MonitorTrapArgs>;

/** The options HiveMonitorArgs knows, to reject typos by name. */
export const MONITOR_OPTIONS = [
  "namespace",
  "image",
  "imagePullPolicy",
  "imagePullSecrets",
  "callback",
  "clusterName",
  "tenantCallbacks",
  "traps",
  "nodeSelector",
  "tolerations",
  "affinity",
  "resources",
  "podLabels",
  "podAnnotations",
  "updateStrategy",
  "priorityClassName",
  "priorityClassQuota",
  "logLevel",
  "metricsPort",
  "runtimeSocket",
  "spoolDir",
  "imageLayers",
  "containerdRoot",
  "legacyKernelCapabilities",
  "sharedKernels",
  "admissionPolicy",
  "podMonitor",
  "prometheusRule",
  "grafanaDashboard",
  "reports",
  "deleteCrdsOnDestroy",
] as const satisfies readonly (keyof HiveMonitorArgs)[];

export const LOG_LEVELS = ["debug", "info", "warn", "error"] as const satisfies readonly LogLevel[];
export const PULL_POLICIES = ["Always", "IfNotPresent", "Never"] as const satisfies readonly PullPolicy[];
