/**
 * The typed surface of the component: what a platform engineer writes in a Pulumi program
 * (and what `hive render --config` reads). Idiomatic TypeScript, camelCase; the builders map
 * it onto the resource fields of api/ (`container-name`, octal `mode` strings…).
 *
 * Values are plain (not `pulumi.Input`) on purpose: every option is validated before any
 * child resource is created, and the same values feed `renderManifests` for kubectl users.
 */
import type { AccessKind } from "../api/index.ts";

export type LogLevel = "debug" | "info" | "warn" | "error";
export type PullPolicy = "Always" | "IfNotPresent" | "Never";

/** Which pods and containers a trap applies to; no filter matches every pod. */
export interface TrapMatchArgs {
  /** Name of the pod. */
  pod?: string;
  /** Namespace of the pod. */
  namespace?: string;
  /** IPv4 address of the pod. */
  ip?: string;
  /**
   * Container names to watch, matched against the whole name. A RegExp's `source` is used;
   * flags are not supported (the agent compiles the pattern without flags).
   */
  containerName?: RegExp | string;
  /** Labels the pod must carry, all of them, with these values. */
  matchLabels?: Record<string, string>;
}

/**
 * An expected accessor of a trapped file: an access matching every field given raises no
 * alert and is counted instead. Decided on the executable the kernel recorded (inside the
 * container), never on the process name; an executable the kernel did not know is never
 * allowed. Give `exe`, `parentExe` or both.
 */
export interface AllowArgs {
  /** Absolute path of the accessing executable, e.g. `/usr/sbin/sshd`; a trailing `*` matches a prefix. */
  exe?: string;
  /** Absolute path of the accessing process's parent executable, e.g. `/usr/sbin/cron`; a trailing `*` matches a prefix. */
  parentExe?: string;
  /** Allow only accesses whose kinds are all among these. Default: any kind. */
  accesses?: AccessKind[];
}

/** A file to watch inside every matched container. */
export interface TrapArgs {
  /** Absolute path of the file inside the container, e.g. `/etc/shadow`. */
  path: string;
  /** Create the file (empty) when it does not exist. Default: false. */
  create?: boolean;
  /**
   * Permission bits of a created file. A number is the bits themselves (write `0o444`);
   * a string is octal digits as in the reference design (`"444"`, `"0444"`). Needs `create: true`.
   */
  mode?: number | string;
  /** URL that receives this trap's alerts; default: the monitor's callback. */
  callback?: string;
  /** Access kinds that raise an alert. Default: all (read, write, exec, append, open). */
  accesses?: AccessKind[];
  match?: TrapMatchArgs;
  /** Expected accessors, counted and not alerted (at most 64). Default: none, every access alerts. */
  allow?: AllowArgs[];
}

/** A trap placed by HiveMonitor into a HivePolicy named by `policy`. */
export interface MonitorTrapArgs extends TrapArgs {
  /** Name of the HivePolicy holding this trap; traps with the same name share one. Default: `"default"`. */
  policy?: string;
}

export interface SecretKeyRef {
  /** Secret in the monitor's namespace. */
  name: string;
  /** Key inside the Secret. */
  key: string;
}

/** Where alerts go when a trap names no callback of its own. */
export interface CallbackArgs {
  /** http(s) URL receiving each alert as a JSON POST. */
  url: string;
  /** A Secret in the monitor's namespace whose entries are sent as HTTP headers (e.g. `Authorization`). */
  headersSecret?: string;
  /** HMAC-SHA256 key for signing alert bodies, from a Secret in the monitor's namespace. */
  signingSecret?: SecretKeyRef;
}

export interface Toleration {
  key?: string;
  operator?: "Exists" | "Equal";
  value?: string;
  effect?: "NoSchedule" | "PreferNoSchedule" | "NoExecute";
  tolerationSeconds?: number;
}

export interface ResourceRequirements {
  requests?: Record<string, string>;
  limits?: Record<string, string>;
}

export interface HiveMonitorArgs {
  /**
   * Namespace of the agent, its HiveData and the monitor's HivePolicies. A string creates the
   * namespace; `{ existing: "name" }` uses one that exists (it must allow privileged pods).
   * Default: `"hive-system"`, created.
   */
  namespace?: string | { existing: string };
  /** The agent image (built from this repository's Dockerfile), e.g. `registry.example.com/hive:0.1.0`. */
  image: string;
  /** Default: `IfNotPresent`. */
  imagePullPolicy?: PullPolicy;
  /** Names of image pull Secrets in the monitor's namespace. */
  imagePullSecrets?: string[];
  /** Default destination of alerts. Without it (and without a trap callback) alerts go to stdout only. */
  callback?: CallbackArgs;
  /**
   * URL prefixes that HivePolicies outside the monitor's namespace (tenants') may name as a
   * trap `callback`, besides the monitor's own callback, e.g. `https://alerts.example.com/teams/`.
   * A tenant trap naming another URL is rejected at admission, and the agent never contacts it
   * (its alerts go to the monitor's callback). Default: none.
   */
  tenantCallbacks?: string[];
  /** Traps, grouped into one HivePolicy per `policy` name. */
  traps?: MonitorTrapArgs[];
  /** Extra node labels the agent's nodes must carry (`kubernetes.io/os: linux` and `kubernetes.io/arch: amd64` are always set). */
  nodeSelector?: Record<string, string>;
  /** Default: tolerate the control-plane taint, so control-plane nodes are watched too. */
  tolerations?: Toleration[];
  /** Default: requests cpu 50m / memory 128Mi, limit memory 512Mi. */
  resources?: ResourceRequirements;
  /**
   * Default: `system-node-critical`: a security agent should be the last pod a node evicts
   * under pressure. An empty string leaves the cluster's default priority.
   */
  priorityClassName?: string;
  /** Default: `info`. */
  logLevel?: LogLevel;
  /** Port of `/metrics`, `/healthz` and `/readyz`. Default: 9464. */
  metricsPort?: number;
  /** Host path of the containerd socket. Default: `/run/containerd/containerd.sock` (k3s: `/run/k3s/containerd/containerd.sock`). */
  runtimeSocket?: string;
  /** Host directory of the alert spool (alerts not delivered yet survive restarts there). Default: `/var/lib/hive/spool`. */
  spoolDir?: string;
  /**
   * Adds CAP_SYS_ADMIN, for two kinds of node kernels only: older than 5.8 (no CAP_BPF and
   * CAP_PERFMON: bpf() demands CAP_SYS_ADMIN), and kernels with neither kprobe.multi links
   * (5.18+ with CONFIG_FPROBE) nor BPF trampolines (fentry), where only a perf-event kprobe
   * can attach and Debian's and Ubuntu's perf_event_paranoid patch reserves perf_event_open
   * to CAP_SYS_ADMIN. Current kernels need neither (the agent reports PermissionDenied with
   * this option named when they do). Default: false.
   */
  legacyKernelCapabilities?: boolean;
  /**
   * Create the ValidatingAdmissionPolicy that keeps each agent to its own node's HiveData.
   * It needs admissionregistration.k8s.io/v1 and the node name in service-account tokens
   * (Kubernetes 1.30 or later). Turn it off only for older clusters: a compromised node could
   * then forge or delete the HiveData of every node. Default: true.
   */
  admissionPolicy?: boolean;
}

/** The options HiveMonitorArgs knows, to reject typos by name. */
export const MONITOR_OPTIONS = [
  "namespace",
  "image",
  "imagePullPolicy",
  "imagePullSecrets",
  "callback",
  "tenantCallbacks",
  "traps",
  "nodeSelector",
  "tolerations",
  "resources",
  "priorityClassName",
  "logLevel",
  "metricsPort",
  "runtimeSocket",
  "spoolDir",
  "legacyKernelCapabilities",
  "admissionPolicy",
] as const satisfies readonly (keyof HiveMonitorArgs)[];

export const LOG_LEVELS = ["debug", "info", "warn", "error"] as const satisfies readonly LogLevel[];
export const PULL_POLICIES = ["Always", "IfNotPresent", "Never"] as const satisfies readonly PullPolicy[];
