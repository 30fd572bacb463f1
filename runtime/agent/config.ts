/**
 * Agent configuration from flags and environment. The DaemonSet passes the node and pod
 * identity through the downward API (NODE_NAME, POD_NAME, POD_NAMESPACE); every flag has an
 * environment twin so the manifest can use either.
 */
import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import { CALLBACK_FORMATS, type CallbackFormat } from "../../api/alert.ts";
import { HiveError } from "../../api/errors.ts";
import {
  DEFAULT_FAIL_WINDOW_SECONDS,
  DEFAULT_REPORT_FORMAT,
  REPORT_FORMAT_NAMES,
  type ReportFormat,
} from "../../api/report.ts";
import { callbackPrefixProblem, normalizeCallbackPrefix } from "../../api/tenancy.ts";
import { RESOLVE_TIMEOUT_MS } from "../discover/resolve-pool.ts";
import { DEFAULT_LEASE, type LeaseTiming, leaseTiming } from "../k8s/lease.ts";
import { ATTACH_REQUESTS, type AttachRequest } from "../kernel/contract.ts";
import { type AgentFlags, flag, flagOrEnv, positiveInt, readAgentFlags } from "./config-flags.ts";

export interface AgentConfig {
  nodeName: string;
  podName: string;
  namespace: string;
  /** Kubernetes access: a kubeconfig file, or a URL (+ token), else in-cluster. */
  kubeconfig?: string;
  server?: string;
  token?: string;
  runtimeSocket: string;
  containerdNamespaces: string[];
  /** Where traps of policies outside `namespace` may send alerts besides the default callback (api/tenancy.ts). */
  tenantCallbacks: string[];
  procRoot: string;
  /** Deadline of one trap path resolution (ms, default 5,000): past it the trap is reported unresolved. */
  resolveTimeoutMs: number;
  bootIdPath: string;
  metricsPort: number;
  callback?: string;
  /** Secret (agent namespace) whose entries are sent as headers to the default callback. */
  callbackHeadersSecret?: string;
  /** Secret and key holding the HMAC key that signs alerts to the default callback. */
  callbackSigningSecret?: string;
  callbackSigningKey?: string;
  /** Body format of alerts to the default callback (and the URLs under its origin); default json. */
  callbackFormat: CallbackFormat;
  /** The cluster's name, put into every alert (`cluster.name`). */
  clusterName?: string;
  logLevel: "debug" | "info" | "warn" | "error";
  spoolDir?: string;
  attachMode: AttachRequest;
  bpfObject?: string;
  /** The kernel's list of active LSMs, read to choose how to deny (default /sys/kernel/security/lsm). */
  lsmFile?: string;
  /** Entries of the kernel watch map (default: the program's, 65,536). */
  watchCapacity?: number;
  /** Checks of one file by one thread fold into one access while each follows the previous within this (ms; default 5). */
  burstGapMs?: number;
  /** bpffs directory of the pinned maps (default: the kernel loader's, /sys/fs/bpf/hive). */
  pinRoot?: string;
  /** Directory of the watch table `hive status` reads (default /run/hive). */
  tableDir?: string;
  roles: { loader: boolean; pods: boolean };
  /** Nodes of this cluster may share a kernel (kind): another node's reported boot id is believed. */
  sharedKernels: boolean;
  /** Prove each trap with the kernel program before arming it (trap-proof.ts); default true. */
  trapProof: boolean;
  /**
   * The container runtime's image layers (containerd's overlayfs `snapshots` directory): traps are
   * armed on their files before containers start. Unset: traps are armed per running container only.
   */
  imageLayers?: string;
  /** The cgroup v2 root where containers' cgroups are found by id (default /sys/fs/cgroup). */
  cgroupRoot: string;
  /** containerd's state directory, with the task bundles naming each container (default: the socket's directory). */
  runtimeStateDir?: string;
  lease: LeaseTiming;
  /** Reports per namespace (runtime/reports/), in this format: written by the pods role unless `none`. */
  reports: ReportFormat | "none";
  /** How long a report result stays `fail` after the last unexpected access (hours). */
  reportFailWindowHours: number;
  /** The DaemonSet that runs this agent: gone or being deleted when it stops, the kernel program is removed (uninstall.ts). */
  daemonSet?: string;
}

export const AGENT_USAGE = `hive agent — the node agent (DaemonSet): discover on every node, loader per kernel, pods per cluster

Options (environment in brackets):
  --node-name NAME          this node [NODE_NAME] (required; downward API spec.nodeName)
  --pod-name NAME           this agent's identity in elections [POD_NAME] (default: hostname)
  --namespace NS            namespace of the agent's Leases [POD_NAMESPACE] (default: hive-system)
  --kubeconfig FILE         kubeconfig [KUBECONFIG] (default: in-cluster service account)
  --server URL              API server URL (with --token) [HIVE_API_SERVER]
  --token TOKEN             bearer token for --server [HIVE_API_TOKEN]
  --runtime-socket PATH     container runtime socket [HIVE_RUNTIME_SOCKET] (default: /run/containerd/containerd.sock)
  --containerd-namespace NS containerd namespaces to search, comma-separated [HIVE_CONTAINERD_NAMESPACES] (default: k8s.io)
  --proc-root DIR           the host's /proc (hostPID) [HIVE_PROC_ROOT] (default: /proc)
  --resolve-timeout MS      deadline of one trap path resolution [HIVE_RESOLVE_TIMEOUT_MS] (default: 5000)
  --metrics-port PORT       /metrics /healthz /readyz [HIVE_METRICS_PORT] (default: 9090; 0 = any)
  --callback URL            default alert callback [HIVE_CALLBACK] (alias --default-callback)
  --tenant-callback PREFIX  a URL prefix that policies outside --namespace may send alerts to,
                            besides the default callback (repeatable) [HIVE_TENANT_CALLBACKS, comma-separated]
  --callback-headers-secret NAME  Secret whose entries are headers for the default callback
  --callback-signing-secret NAME --callback-signing-key KEY  HMAC key signing alerts to it
  --callback-format FORMAT  body of alerts to the default callback's origin: json | cloudevents |
                            alertmanager | slack [HIVE_CALLBACK_FORMAT] (default: json)
  --cluster-name NAME       the cluster's name, put into every alert [HIVE_CLUSTER_NAME]
  --log-level LEVEL         debug | info | warn | error [HIVE_LOG_LEVEL] (default: info)
  --spool-dir DIR           durable alert spool [HIVE_SPOOL_DIR]
  --attach MODE             auto | kprobe.multi | fentry | kprobe [HIVE_ATTACH] (default: auto, the least-privileged mode the kernel can attach)
  --bpf-object FILE         compiled program [HIVE_BPF_OBJECT]
  --lsm-file FILE           the kernel's active LSMs: the BPF LSM denies where it lists bpf [HIVE_LSM_FILE] (default: /sys/kernel/security/lsm)
  --watch-capacity N        files (and their directories) the kernel watch map holds [HIVE_WATCH_CAPACITY] (default: 65536)
  --burst-gap MS            one access's permission checks fold into one alert while each follows the
                            previous within MS [HIVE_BURST_GAP_MS] (default: 5; raise it on emulated or overloaded nodes)
  --pin-root DIR            bpffs directory of the pinned maps [HIVE_PIN_ROOT] (default: /sys/fs/bpf/hive)
  --table-dir DIR           where the watch table for \`hive status\` is written [HIVE_TABLE_DIR] (default: /run/hive)
  --image-layers DIR        containerd's overlayfs snapshots directory: traps are armed on the image's
                            file before a container starts [HIVE_IMAGE_LAYERS] (default: unset, per running container only)
  --cgroup-root DIR         the host's cgroup v2 root, to find an access's container [HIVE_CGROUP_ROOT] (default: /sys/fs/cgroup)
  --runtime-state-dir DIR   containerd's state directory (task bundles) [HIVE_RUNTIME_STATE_DIR] (default: the socket's directory)
  --daemonset NAME          the DaemonSet running this agent, in --namespace [HIVE_DAEMONSET]: when the agent
                            stops while it is gone or being deleted, the kernel program is detached and
                            unpinned (an uninstall); otherwise it stays attached for the next agent
  --reports FORMAT          findings as a report per namespace: policyreport | openreports | none [HIVE_REPORTS] (default: policyreport, once the API server serves its CRD)
  --report-fail-window H    hours a result stays fail after the last unexpected access [HIVE_REPORT_FAIL_WINDOW_HOURS] (default: 168)
  --no-loader / --no-pods   never run that role on this node
  --shared-kernels          nodes of this cluster may share a kernel (containers on one host, as kind's):
                            they elect one loader per kernel, and a node's reported boot id is believed
                            (off: another node never acts for this node's kernel)
  --no-trap-proof           arm the identity stat() gives without proving it with the kernel program
                            (only where no program can load, e.g. measuring the controllers: on an
                            overlay such a trap may never fire)
  --lease-duration MS       [HIVE_LEASE_DURATION_MS] (default 90000: the pods Lease; renew deadline 2/3 of it, renewed every 1/3, candidates poll every 2/15)`;

/** The agent's configuration from flags, else their environment twins; a problem is a ConfigInvalid error. */
export function parseAgentConfig(argv: string[], env: NodeJS.ProcessEnv = process.env): AgentConfig {
  const flags = readAgentFlags(argv, env);
  // Each step throws on its section's first problem, so the steps' order decides which is reported.
  const identity = parseIdentity(flags);
  const attachMode = parseAttachMode(flags);
  const logLevel = parseLogLevel(flags);
  const callback = parseCallback(flags);
  const lease = parseLease(flags);
  const reports = parseReports(flags);
  const tenantCallbacks = parseTenantCallbacks(flags);
  const runtime = parseNodeRuntime(flags);
  const metricsPort = positiveInt(
    "--metrics-port",
    flagOrEnv(flags, "metrics-port", "HIVE_METRICS_PORT"),
    9090,
  );
  const kernel = parseKernelProgram(flags);
  return {
    ...identity,
    attachMode,
    logLevel,
    ...callback,
    lease,
    ...reports,
    tenantCallbacks,
    ...runtime,
    metricsPort,
    ...kernel,
    ...parseKubernetesAccess(flags),
    roles: { loader: !flags.values["no-loader"], pods: !flags.values["no-pods"] },
    sharedKernels: flags.values["shared-kernels"] === true,
    bootIdPath: "/proc/sys/kernel/random/boot_id",
    ...withoutUnset({
      spoolDir: flagOrEnv(flags, "spool-dir", "HIVE_SPOOL_DIR"),
      daemonSet: flagOrEnv(flags, "daemonset", "HIVE_DAEMONSET") || undefined,
    }),
  };
}

/** `fields` without its unset entries: an unset optional setting is absent from the config. */
function withoutUnset<T extends object>(fields: T): T {
  return Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined)) as T;
}

/** Who this agent is: its node and pod (the downward API), and its Leases' namespace. */
function parseIdentity(flags: AgentFlags): Pick<AgentConfig, "nodeName" | "podName" | "namespace"> {
  const nodeName = flagOrEnv(flags, "node-name", "NODE_NAME");
  if (!nodeName) {
    throw new HiveError("ConfigInvalid", "the node name is not set", {
      object: "NODE_NAME",
      hint: "set env NODE_NAME from the downward API (fieldRef spec.nodeName) or pass --node-name",
    });
  }
  return {
    nodeName,
    podName: flagOrEnv(flags, "pod-name", "POD_NAME") ?? hostname(),
    namespace: flagOrEnv(flags, "namespace", "POD_NAMESPACE") ?? "hive-system",
  };
}

function parseAttachMode(flags: AgentFlags): AttachRequest {
  const attach = (flagOrEnv(flags, "attach", "HIVE_ATTACH") ?? "auto") as AttachRequest;
  if (!ATTACH_REQUESTS.includes(attach)) {
    throw new HiveError("ConfigInvalid", `attach mode must be one of ${ATTACH_REQUESTS.join(", ")}`, {
      object: attach,
    });
  }
  return attach;
}

function parseLogLevel(flags: AgentFlags): AgentConfig["logLevel"] {
  const logLevel = flagOrEnv(flags, "log-level", "HIVE_LOG_LEVEL") ?? "info";
  if (!["debug", "info", "warn", "error"].includes(logLevel)) {
    throw new HiveError("ConfigInvalid", "log level must be debug, info, warn or error", {
      object: logLevel,
    });
  }
  return logLevel as AgentConfig["logLevel"];
}

/** The default callback: its URL, the Secrets of its headers and signing key, its alerts' format. */
function parseCallback(
  flags: AgentFlags,
): Pick<
  AgentConfig,
  | "callback"
  | "callbackHeadersSecret"
  | "callbackSigningSecret"
  | "callbackSigningKey"
  | "callbackFormat"
  | "clusterName"
> {
  const callback = flag(flags, "default-callback") ?? flagOrEnv(flags, "callback", "HIVE_CALLBACK");
  const headersSecret = flag(flags, "callback-headers-secret");
  const [signingSecret, signingKey] = [
    flag(flags, "callback-signing-secret"),
    flag(flags, "callback-signing-key"),
  ];
  if ((signingSecret === undefined) !== (signingKey === undefined)) {
    throw new HiveError("ConfigInvalid", "--callback-signing-secret and --callback-signing-key go together", {
      object: flags.argv.join(" "),
    });
  }
  if (callback === undefined && (headersSecret !== undefined || signingSecret !== undefined)) {
    throw new HiveError("ConfigInvalid", "callback secrets need a default callback", {
      object: flags.argv.join(" "),
    });
  }
  if (callback !== undefined && !/^https?:\/\//.test(callback)) {
    throw new HiveError("ConfigInvalid", "the callback must be an http(s) URL", { object: callback });
  }
  const callbackFormat = (flagOrEnv(flags, "callback-format", "HIVE_CALLBACK_FORMAT") ??
    "json") as CallbackFormat;
  if (!CALLBACK_FORMATS.includes(callbackFormat)) {
    throw new HiveError("ConfigInvalid", `--callback-format must be one of ${CALLBACK_FORMATS.join(", ")}`, {
      object: callbackFormat,
    });
  }
  return {
    callbackFormat,
    ...withoutUnset({
      callback,
      callbackHeadersSecret: headersSecret,
      callbackSigningSecret: signingSecret,
      callbackSigningKey: signingKey,
      clusterName: flagOrEnv(flags, "cluster-name", "HIVE_CLUSTER_NAME") || undefined,
    }),
  };
}

function parseLease(flags: AgentFlags): LeaseTiming {
  return leaseTiming(
    positiveInt(
      "--lease-duration",
      flagOrEnv(flags, "lease-duration", "HIVE_LEASE_DURATION_MS"),
      DEFAULT_LEASE.leaseDurationMs,
    ),
  );
}

function parseReports(flags: AgentFlags): Pick<AgentConfig, "reports" | "reportFailWindowHours"> {
  const reports = (flagOrEnv(flags, "reports", "HIVE_REPORTS") ?? DEFAULT_REPORT_FORMAT) as
    | ReportFormat
    | "none";
  if (reports !== "none" && !REPORT_FORMAT_NAMES.includes(reports)) {
    throw new HiveError("ConfigInvalid", `--reports must be ${REPORT_FORMAT_NAMES.join(", ")} or none`, {
      object: reports,
    });
  }
  const reportFailWindowHours = positiveInt(
    "--report-fail-window",
    flagOrEnv(flags, "report-fail-window", "HIVE_REPORT_FAIL_WINDOW_HOURS"),
    DEFAULT_FAIL_WINDOW_SECONDS / 3600,
  );
  if (reportFailWindowHours === 0)
    throw new HiveError("ConfigInvalid", "--report-fail-window must be at least 1 hour", { object: "0" });
  return { reports, reportFailWindowHours };
}

/** Where policies outside the agent's namespace may send alerts (api/tenancy.ts), as normalized prefixes. */
function parseTenantCallbacks(flags: AgentFlags): string[] {
  const prefixes =
    (flags.values["tenant-callback"] as string[] | undefined) ??
    (flags.env.HIVE_TENANT_CALLBACKS ?? "").split(",").filter(Boolean);
  return prefixes.map((prefix) => {
    const problem = callbackPrefixProblem(prefix);
    if (problem !== undefined)
      throw new HiveError("ConfigInvalid", `a tenant callback prefix ${problem}`, { object: prefix });
    return normalizeCallbackPrefix(prefix);
  });
}

/** The node's container runtime and host directories: where containers and their files are found. */
function parseNodeRuntime(
  flags: AgentFlags,
): Pick<
  AgentConfig,
  | "runtimeSocket"
  | "containerdNamespaces"
  | "procRoot"
  | "resolveTimeoutMs"
  | "trapProof"
  | "cgroupRoot"
  | "imageLayers"
  | "runtimeStateDir"
> {
  const resolveTimeoutMs = positiveInt(
    "--resolve-timeout",
    flagOrEnv(flags, "resolve-timeout", "HIVE_RESOLVE_TIMEOUT_MS"),
    RESOLVE_TIMEOUT_MS,
  );
  if (resolveTimeoutMs === 0)
    throw new HiveError("ConfigInvalid", "--resolve-timeout must be more than 0", {
      object: "0",
      hint: `e.g. --resolve-timeout=${RESOLVE_TIMEOUT_MS}`,
    });
  return {
    runtimeSocket:
      flagOrEnv(flags, "runtime-socket", "HIVE_RUNTIME_SOCKET") ?? "/run/containerd/containerd.sock",
    containerdNamespaces: (flagOrEnv(flags, "containerd-namespace", "HIVE_CONTAINERD_NAMESPACES") ?? "k8s.io")
      .split(",")
      .filter(Boolean),
    procRoot: flagOrEnv(flags, "proc-root", "HIVE_PROC_ROOT") ?? "/proc",
    resolveTimeoutMs,
    trapProof: !flags.values["no-trap-proof"],
    cgroupRoot: flagOrEnv(flags, "cgroup-root", "HIVE_CGROUP_ROOT") ?? "/sys/fs/cgroup",
    ...withoutUnset({
      imageLayers: flagOrEnv(flags, "image-layers", "HIVE_IMAGE_LAYERS") || undefined,
      runtimeStateDir: flagOrEnv(flags, "runtime-state-dir", "HIVE_RUNTIME_STATE_DIR"),
    }),
  };
}

/** How to reach the API server: a kubeconfig, or a URL and token; neither means in-cluster. */
function parseKubernetesAccess(flags: AgentFlags): Pick<AgentConfig, "kubeconfig" | "server" | "token"> {
  return withoutUnset({
    kubeconfig: flagOrEnv(flags, "kubeconfig", "KUBECONFIG"),
    server: flagOrEnv(flags, "server", "HIVE_API_SERVER"),
    token: flagOrEnv(flags, "token", "HIVE_API_TOKEN"),
  });
}

/** The kernel program's object, its pinned maps and watch table, and the sizes it runs with. */
function parseKernelProgram(
  flags: AgentFlags,
): Pick<AgentConfig, "bpfObject" | "lsmFile" | "pinRoot" | "tableDir" | "burstGapMs" | "watchCapacity"> {
  const gap = flagOrEnv(flags, "burst-gap", "HIVE_BURST_GAP_MS");
  const burstGapMs = gap === undefined ? undefined : positiveInt("--burst-gap", gap, 5);
  if (burstGapMs !== undefined && (burstGapMs < 1 || burstGapMs > 1000))
    throw new HiveError("ConfigInvalid", "--burst-gap must be from 1 to 1000 ms", { object: gap });
  const capacity = flagOrEnv(flags, "watch-capacity", "HIVE_WATCH_CAPACITY");
  const watchCapacity =
    capacity === undefined ? undefined : positiveInt("--watch-capacity", capacity, 65_536);
  if (watchCapacity !== undefined && watchCapacity < 1)
    throw new HiveError("ConfigInvalid", "--watch-capacity must be at least 1", { object: capacity });
  return withoutUnset({
    bpfObject: flagOrEnv(flags, "bpf-object", "HIVE_BPF_OBJECT"),
    lsmFile: flagOrEnv(flags, "lsm-file", "HIVE_LSM_FILE"),
    pinRoot: flagOrEnv(flags, "pin-root", "HIVE_PIN_ROOT"),
    tableDir: flagOrEnv(flags, "table-dir", "HIVE_TABLE_DIR"),
    burstGapMs,
    watchCapacity,
  });
}

/** The kernel's identity: boot_id, read once at start (it changes only with a reboot). */
export function readBootId(path = "/proc/sys/kernel/random/boot_id"): string {
  try {
    const id = readFileSync(path, "utf8").trim();
    if (!/^[0-9a-f-]{36}$/.test(id)) throw new Error(`unexpected content ${JSON.stringify(id)}`);
    return id;
  } catch (error) {
    throw new HiveError("ConfigInvalid", "cannot read the kernel's boot_id", {
      object: path,
      cause: error,
      hint: "the agent needs the host's procfs",
    });
  }
}
