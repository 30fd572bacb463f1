/**
 * HiveMonitorArgs → a complete, validated configuration with every default filled in. All
 * problems are collected (not just the first) so a user fixes them in one round; callers turn
 * them into a `pulumi.ResourceError` (the component) or a HiveError (`hive render`).
 */
import { FORMATS } from "../api/formats.ts";
import {
  CALLBACK_FORMATS,
  DNS_LABEL_PATTERN,
  type HivePolicySpec,
  LABEL_KEY_PATTERN,
  LABEL_VALUE_PATTERN,
  MAX_TRAPS_PER_POLICY,
} from "../api/index.ts";
import type { ReportFormat } from "../api/report.ts";
import { callbackPrefixProblem, normalizeCallbackPrefix } from "../api/tenancy.ts";
import {
  type Affinity,
  type CallbackValues,
  type DaemonSetUpdateStrategy,
  type GrafanaDashboardArgs,
  type HiveMonitorValues,
  LOG_LEVELS,
  type LogLevel,
  MONITOR_OPTIONS,
  type Plain,
  type PodMonitorArgs,
  type PrometheusRuleArgs,
  PULL_POLICIES,
  type PullPolicy,
  type ReportsArgs,
  type ResourceRequirements,
  type Toleration,
} from "./args.ts";
import { CALLBACK_SECRET } from "./builders/callback-secret.ts";
import { AGENT_ARCHITECTURES, AGENT_NODE_SELECTOR, AGENT_SELECTOR } from "./builders/daemonset.ts";
import type { ArgProblem } from "./builders/problems.ts";
import { SYSTEM_NAMESPACE } from "./builders/resource-quota.ts";
import { isPlainObject, toHiveTrap, trapProblems, unknownKeys } from "./builders/traps.ts";
import { checkGrafanaDashboard, checkPrometheusRule, checkReports } from "./monitoring-config.ts";

export const DEFAULT_NAMESPACE = "hive-system";
export const DEFAULT_POLICY = "default";
export const DEFAULT_METRICS_PORT = 9464;
export const DEFAULT_RUNTIME_SOCKET = "/run/containerd/containerd.sock";
export const DEFAULT_SPOOL_DIR = "/var/lib/hive/spool";
export const DEFAULT_CONTAINERD_ROOT = "/var/lib/containerd";
export const DEFAULT_RESOURCES: Plain<ResourceRequirements> = {
  requests: { cpu: "50m", memory: "256Mi" },
  limits: { memory: "512Mi" },
};
/**
 * Every taint: a node without an agent is a node whose accesses nobody reports, and taints
 * (control plane, GPU or dedicated pools, node problems) say nothing about whether its pods
 * need watching. `tolerations` replaces this to narrow it.
 */
export const DEFAULT_TOLERATIONS: Plain<Toleration>[] = [{ operator: "Exists" }];

export interface PolicyConfig {
  name: string;
  spec: HivePolicySpec;
}

/** Evicted last under node pressure (built into every cluster, usable in any namespace since 1.17). */
export const DEFAULT_PRIORITY_CLASS = "system-node-critical";

/** Everything the builders need, defaults applied. */
export interface HiveConfig {
  namespace: string;
  createNamespace: boolean;
  image: string;
  imagePullPolicy: PullPolicy;
  imagePullSecrets: string[];
  callback: CallbackValues | undefined;
  /** Put into every alert (`cluster.name`). */
  clusterName: string | undefined;
  /** Normalized (api/tenancy.ts): where tenant policies' traps may send alerts. */
  tenantCallbacks: string[];
  policies: PolicyConfig[];
  nodeSelector: Record<string, string>;
  tolerations: Plain<Toleration>[];
  affinity: Plain<Affinity> | undefined;
  resources: Plain<ResourceRequirements>;
  podLabels: Record<string, string>;
  podAnnotations: Record<string, string>;
  updateStrategy: Plain<DaemonSetUpdateStrategy>;
  priorityClassName: string | undefined;
  /** Whether to create the ResourceQuota admitting `priorityClassName` pods in the namespace. */
  priorityClassQuota: boolean;
  logLevel: LogLevel;
  metricsPort: number;
  runtimeSocket: string;
  spoolDir: string;
  /** containerd's root on the host, whose image layers traps are armed in; undefined: not armed there. */
  containerdRoot: string | undefined;
  legacyKernelCapabilities: boolean;
  admissionPolicy: boolean;
  /** The Prometheus Operator PodMonitor's settings, when one is wanted. */
  podMonitor: Plain<PodMonitorArgs> | undefined;
  /** The Prometheus Operator PrometheusRule's settings, when one is wanted. */
  prometheusRule: Plain<PrometheusRuleArgs> | undefined;
  /** The Grafana dashboard ConfigMap's settings, when one is wanted. */
  grafanaDashboard: Plain<GrafanaDashboardArgs> | undefined;
  /** The reports' format and settings; undefined when `reports: "none"`. */
  reports: (Plain<ReportsArgs> & { format: ReportFormat }) | undefined;
  deleteCrdsOnDestroy: boolean;
}

/** One agent pod replaced at a time: the others keep watching. */
export const DEFAULT_UPDATE_STRATEGY: Plain<DaemonSetUpdateStrategy> = {
  type: "RollingUpdate",
  rollingUpdate: { maxUnavailable: 1 },
};

export type ConfigResult = { ok: true; config: HiveConfig } | { ok: false; problems: ArgProblem[] };

/** Kubernetes object names: a namespace is a DNS label, most other objects a DNS subdomain. */
export const DNS_LABEL = new RegExp(DNS_LABEL_PATTERN);
export const DNS_SUBDOMAIN = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const LABEL_KEY = new RegExp(LABEL_KEY_PATTERN);
const LABEL_VALUE = new RegExp(LABEL_VALUE_PATTERN);
const SECRET_KEY = /^[-._a-zA-Z0-9]{1,253}$/;
/** A Kubernetes quantity: 100m, 128Mi, 1.5, 2e3. */
const QUANTITY = /^[+-]?(\d+(\.\d*)?|\.\d+)(([KMGTPE]i)|[mkMGTPE]|[eE][+-]?\d+)?$/;
const IMAGE = /^[^\s]+$/;

export class Checker {
  readonly problems: ArgProblem[] = [];
  add(option: string, message: string): void {
    this.problems.push({ option, message });
  }
  name(option: string, value: unknown, pattern: RegExp, what: string): value is string {
    if (typeof value === "string" && pattern.test(value)) return true;
    this.add(option, `${JSON.stringify(value)} is not ${what}`);
    return false;
  }
  oneOf<T extends string>(option: string, value: unknown, allowed: readonly T[]): value is T {
    if (allowed.includes(value as T)) return true;
    this.add(option, `${JSON.stringify(value)} is not one of ${allowed.join(", ")}`);
    return false;
  }
  hostPath(option: string, value: unknown): value is string {
    if (
      typeof value === "string" &&
      value.startsWith("/") &&
      value !== "/" &&
      !value.split("/").includes("..")
    ) {
      return true;
    }
    this.add(option, `${JSON.stringify(value)} must be an absolute host path (not "/", no ".." components)`);
    return false;
  }
  labels(option: string, value: unknown): value is Record<string, string> {
    if (!isPlainObject(value)) {
      this.add(option, 'must map label names to values, e.g. { disktype: "ssd" }');
      return false;
    }
    let ok = true;
    for (const [k, v] of Object.entries(value)) {
      if (!LABEL_KEY.test(k)) ok = this.fail(`${option}.${k}`, "the key is not a valid label name");
      else if (typeof v !== "string" || !LABEL_VALUE.test(v)) {
        ok = this.fail(
          `${option}.${k}`,
          `${JSON.stringify(v)} is not a valid label value (63 characters, alphanumeric, - _ .)`,
        );
      }
    }
    return ok;
  }
  fail(option: string, message: string): false {
    this.add(option, message);
    return false;
  }
}

function checkNamespace(
  c: Checker,
  value: HiveMonitorValues["namespace"],
): { name: string; create: boolean } {
  if (value === undefined) return { name: DEFAULT_NAMESPACE, create: true };
  if (typeof value === "string") {
    c.name("namespace", value, DNS_LABEL, "a namespace name (lowercase letters, digits and '-', at most 63)");
    return { name: value, create: true };
  }
  // An `existing` not known yet is undefined here: named by its own option, not as a wrong form.
  if (isPlainObject(value) && Object.hasOwn(value, "existing")) {
    c.problems.push(...unknownKeys(value, ["existing"], "namespace"));
    c.name("namespace.existing", value.existing, DNS_LABEL, "a namespace name");
    return { name: value.existing, create: false };
  }
  c.add(
    "namespace",
    'must be a name to create ("hive-system") or { existing: "name" } to use one that exists',
  );
  return { name: DEFAULT_NAMESPACE, create: true };
}

function checkCallback(c: Checker, value: unknown): CallbackValues | undefined {
  if (value === undefined) return undefined;
  const url = FORMATS["http-url"];
  // A URL alone is short for { url }.
  if (typeof value === "string") {
    if (!url?.(value)) c.add("callback", `${JSON.stringify(value)} must be an http:// or https:// URL`);
    return { url: value };
  }
  if (!isPlainObject(value)) {
    c.add(
      "callback",
      'must be a URL or an object such as { url: "https://alerts.example.com/hive", headersSecret: "hive-callback" }',
    );
    return undefined;
  }
  c.problems.push(
    ...unknownKeys(value, ["url", "urlSecret", "headersSecret", "signingSecret", "format"], "callback"),
  );
  const cb = value as unknown as CallbackValues;
  if (cb.format !== undefined) c.oneOf("callback.format", cb.format, CALLBACK_FORMATS);
  if (cb.urlSecret !== undefined) {
    if (cb.url !== undefined) c.add("callback.urlSecret", "goes instead of callback.url: give one of them");
    secretKeyRef(c, "callback.urlSecret", cb.urlSecret);
  } else if (typeof cb.url !== "string" || !url?.(cb.url)) {
    c.add(
      "callback.url",
      `${JSON.stringify(cb.url)} must be an http:// or https:// URL (or give urlSecret: { name, key })`,
    );
  } else {
    // The component writes its own Secret for the URL: a user's Secret of that name would be overwritten.
    for (const [option, name] of [
      ["callback.headersSecret", cb.headersSecret],
      ["callback.signingSecret.name", cb.signingSecret?.name],
    ] as const) {
      if (name === CALLBACK_SECRET.name)
        c.add(option, `"${name}" is the Secret the monitor writes for callback.url; name another`);
    }
  }
  if (cb.headersSecret !== undefined) {
    c.name(
      "callback.headersSecret",
      cb.headersSecret,
      DNS_SUBDOMAIN,
      "a Secret name in the monitor's namespace",
    );
  }
  if (cb.signingSecret !== undefined) secretKeyRef(c, "callback.signingSecret", cb.signingSecret);
  return cb;
}

function secretKeyRef(c: Checker, option: string, value: unknown): void {
  if (!isPlainObject(value)) {
    c.add(option, 'must be { name: "secret-name", key: "key-in-secret" }');
    return;
  }
  c.problems.push(...unknownKeys(value, ["name", "key"], option));
  c.name(`${option}.name`, value.name, DNS_SUBDOMAIN, "a Secret name");
  c.name(`${option}.key`, value.key, SECRET_KEY, "a key of a Secret (letters, digits, - _ .)");
}

function checkTolerations(c: Checker, value: unknown): Plain<Toleration>[] {
  if (value === undefined) return DEFAULT_TOLERATIONS;
  if (!Array.isArray(value)) {
    c.add("tolerations", "must be a list of tolerations");
    return [];
  }
  for (const [i, t] of value.entries()) {
    const at = `tolerations[${i}]`;
    if (!isPlainObject(t)) {
      c.add(at, "must be an object");
      continue;
    }
    c.problems.push(...unknownKeys(t, ["key", "operator", "value", "effect", "tolerationSeconds"], at));
    if (t.operator !== undefined) c.oneOf(`${at}.operator`, t.operator, ["Exists", "Equal"]);
    if (t.effect !== undefined)
      c.oneOf(`${at}.effect`, t.effect, ["NoSchedule", "PreferNoSchedule", "NoExecute"]);
    if (t.operator === "Exists" && t.value !== undefined)
      c.add(`${at}.value`, 'must be empty with operator "Exists"');
    if (t.key !== undefined && (typeof t.key !== "string" || !LABEL_KEY.test(t.key))) {
      c.add(`${at}.key`, "must be a taint key such as node-role.kubernetes.io/control-plane");
    }
    if (t.tolerationSeconds !== undefined && !Number.isInteger(t.tolerationSeconds)) {
      c.add(`${at}.tolerationSeconds`, "must be a whole number of seconds");
    }
  }
  return value as Plain<Toleration>[];
}

function checkResources(c: Checker, value: unknown): Plain<ResourceRequirements> {
  if (value === undefined) return DEFAULT_RESOURCES;
  if (!isPlainObject(value)) {
    c.add("resources", 'must be { requests?: { cpu: "50m" }, limits?: { memory: "512Mi" } }');
    return {};
  }
  c.problems.push(...unknownKeys(value, ["requests", "limits", "claims"], "resources"));
  for (const part of ["requests", "limits"] as const) {
    const quantities = value[part];
    if (quantities === undefined) continue;
    if (!isPlainObject(quantities)) {
      c.add(`resources.${part}`, 'must map resource names to quantities, e.g. { memory: "512Mi" }');
      continue;
    }
    for (const [name, q] of Object.entries(quantities)) {
      if (typeof q !== "string" || !QUANTITY.test(q)) {
        c.add(
          `resources.${part}.${name}`,
          `${JSON.stringify(q)} is not a quantity such as "100m" or "256Mi" (write it as a string)`,
        );
      }
    }
  }
  return value as Plain<ResourceRequirements>;
}

function checkAffinity(c: Checker, value: unknown): Plain<Affinity> | undefined {
  if (value === undefined) return undefined;
  if (!isPlainObject(value)) {
    c.add("affinity", "must be { nodeAffinity?, podAffinity?, podAntiAffinity? } as in a pod spec");
    return undefined;
  }
  c.problems.push(...unknownKeys(value, ["nodeAffinity", "podAffinity", "podAntiAffinity"], "affinity"));
  return value as Plain<Affinity>;
}

/** Label keys the DaemonSet's selector and Hive's own labels use: a pod label must not change them. */
const RESERVED_POD_LABELS = [...Object.keys(AGENT_SELECTOR), "app.kubernetes.io/instance"];

function checkPodMetadata(c: Checker, labels: unknown, annotations: unknown): void {
  if (labels !== undefined && c.labels("podLabels", labels)) {
    for (const key of Object.keys(labels)) {
      if (RESERVED_POD_LABELS.includes(key))
        c.add(`podLabels.${key}`, "is set by Hive (the DaemonSet selects its pods by it); use another key");
    }
  }
  if (annotations === undefined) return;
  if (!isPlainObject(annotations)) {
    c.add("podAnnotations", 'must map annotation names to values, e.g. { "example.com/team": "security" }');
    return;
  }
  for (const [k, v] of Object.entries(annotations)) {
    if (!LABEL_KEY.test(k)) c.add(`podAnnotations.${k}`, "the key is not a valid annotation name");
    else if (typeof v !== "string") c.add(`podAnnotations.${k}`, `${JSON.stringify(v)} must be a string`);
  }
}

/** An int or a percentage, as Kubernetes' IntOrString fields of a rolling update take them. */
const INT_OR_PERCENT = /^\d+%?$/;

function checkUpdateStrategy(c: Checker, value: unknown): Plain<DaemonSetUpdateStrategy> {
  if (value === undefined) return DEFAULT_UPDATE_STRATEGY;
  if (!isPlainObject(value)) {
    c.add(
      "updateStrategy",
      'must be { type: "RollingUpdate", rollingUpdate?: { maxUnavailable } } or { type: "OnDelete" }',
    );
    return DEFAULT_UPDATE_STRATEGY;
  }
  c.problems.push(...unknownKeys(value, ["type", "rollingUpdate"], "updateStrategy"));
  const type = value.type ?? "RollingUpdate";
  c.oneOf("updateStrategy.type", type, ["RollingUpdate", "OnDelete"]);
  const rolling = value.rollingUpdate;
  if (rolling !== undefined) {
    if (type !== "RollingUpdate")
      c.add("updateStrategy.rollingUpdate", 'only applies with type "RollingUpdate"');
    else if (!isPlainObject(rolling))
      c.add("updateStrategy.rollingUpdate", "must be { maxUnavailable?, maxSurge? }");
    else {
      c.problems.push(
        ...unknownKeys(rolling, ["maxUnavailable", "maxSurge"], "updateStrategy.rollingUpdate"),
      );
      for (const key of ["maxUnavailable", "maxSurge"]) {
        const v = rolling[key];
        if (v === undefined) continue;
        if (
          !(Number.isInteger(v) && (v as number) >= 0) &&
          !(typeof v === "string" && INT_OR_PERCENT.test(v))
        ) {
          c.add(
            `updateStrategy.rollingUpdate.${key}`,
            `${JSON.stringify(v)} must be a number of pods or a percentage such as "10%"`,
          );
        }
      }
    }
  }
  return value as Plain<DaemonSetUpdateStrategy>;
}

function checkPodMonitor(c: Checker, value: unknown): Plain<PodMonitorArgs> | undefined {
  if (value === undefined || value === false) return undefined;
  if (value === true) return {};
  if (!isPlainObject(value)) {
    c.add("podMonitor", 'must be true or { interval?: "30s", labels?: { release: "prometheus" } }');
    return undefined;
  }
  c.problems.push(...unknownKeys(value, ["interval", "labels"], "podMonitor"));
  if (
    value.interval !== undefined &&
    (typeof value.interval !== "string" || !/^(\d+(ms|s|m|h))+$/.test(value.interval))
  ) {
    c.add(
      "podMonitor.interval",
      `${JSON.stringify(value.interval)} must be a duration such as "30s" or "1m"`,
    );
  }
  if (value.labels !== undefined) c.labels("podMonitor.labels", value.labels);
  return value as Plain<PodMonitorArgs>;
}

function groupTraps(c: Checker, value: unknown): { name: string; spec: HivePolicySpec }[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) {
    c.add("traps", 'must be a list of traps such as [{ path: "/etc/shadow" }]');
    return [];
  }
  const groups = new Map<string, HivePolicySpec["traps"]>();
  value.forEach((trap: unknown, i) => {
    const at = `traps[${i}]`;
    const problems = trapProblems(trap, at, ["policy"]);
    const policy = isPlainObject(trap) && trap.policy !== undefined ? trap.policy : DEFAULT_POLICY;
    if (!DNS_SUBDOMAIN.test(String(policy)) || typeof policy !== "string") {
      problems.push({
        option: `${at}.policy`,
        message: `${JSON.stringify(policy)} is not a HivePolicy name (a DNS subdomain)`,
      });
    }
    c.problems.push(...problems);
    if (problems.length > 0) return;
    const list = groups.get(policy as string) ?? [];
    list.push(toHiveTrap(trap as never));
    groups.set(policy as string, list);
  });
  for (const [name, traps] of groups) {
    if (traps.length > MAX_TRAPS_PER_POLICY) {
      c.add(
        "traps",
        `policy "${name}" has ${traps.length} traps; at most ${MAX_TRAPS_PER_POLICY} fit one HivePolicy`,
      );
    }
  }
  return [...groups].map(([name, traps]) => ({ name, spec: { traps } }));
}

/** Validate every option and fill in the defaults. */
function checkTenantCallbacks(c: Checker, value: unknown): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) {
    c.add("tenantCallbacks", 'must be a list of URL prefixes such as ["https://alerts.example.com/teams/"]');
    return [];
  }
  const out: string[] = [];
  for (const [i, p] of value.entries()) {
    // Compared with callbacks as URL parsing writes them (api/tenancy.ts): a prefix in another
    // form would match nothing, or less than it reads.
    const problem = typeof p === "string" ? callbackPrefixProblem(p) : "must be an http:// or https:// URL";
    if (problem !== undefined) c.add(`tenantCallbacks[${i}]`, `${JSON.stringify(p)} ${problem}`);
    else out.push(normalizeCallbackPrefix(p));
  }
  return out;
}

export function resolveConfig(args: HiveMonitorValues): ConfigResult {
  const c = new Checker();
  if (!isPlainObject(args)) {
    return {
      ok: false,
      problems: [{ option: "(args)", message: "must be an object with at least { image }" }],
    };
  }
  c.problems.push(...unknownKeys(args, MONITOR_OPTIONS, ""));
  const namespace = checkNamespace(c, args.namespace);
  if (typeof args.image !== "string" || !IMAGE.test(args.image)) {
    c.add(
      "image",
      'is required: the agent image built from Hive\'s Dockerfile, e.g. "registry.example.com/hive:0.1.0"',
    );
  }
  const pullPolicy = args.imagePullPolicy ?? "IfNotPresent";
  c.oneOf("imagePullPolicy", pullPolicy, PULL_POLICIES);
  const pullSecrets = args.imagePullSecrets ?? [];
  if (!Array.isArray(pullSecrets)) c.add("imagePullSecrets", "must be a list of Secret names");
  else
    for (const [i, s] of pullSecrets.entries())
      c.name(`imagePullSecrets[${i}]`, s, DNS_SUBDOMAIN, "a Secret name");
  const callback = checkCallback(c, args.callback);
  // Passed to the agent as an argument and used as an Alertmanager label value: a label value's form.
  if (args.clusterName !== undefined && (args.clusterName === "" || !LABEL_VALUE.test(args.clusterName)))
    c.add(
      "clusterName",
      `${JSON.stringify(args.clusterName)} must be letters, digits, "-", "_" and "." (at most 63), e.g. "prod-eu-1"`,
    );
  const tenantCallbacks = checkTenantCallbacks(c, args.tenantCallbacks);
  const policies = groupTraps(c, args.traps);
  const nodeSelector = args.nodeSelector ?? {};
  c.labels("nodeSelector", nodeSelector);
  if (typeof nodeSelector === "object" && nodeSelector !== null) {
    for (const [key, fixed] of Object.entries(AGENT_NODE_SELECTOR)) {
      const given = (nodeSelector as Record<string, unknown>)[key];
      if (given !== undefined && given !== fixed) {
        c.add(`nodeSelector.${key}`, `the agent runs only where ${key} is ${fixed}; remove this entry`);
      }
    }
    // Narrowing to one built architecture is fine; another would leave the DaemonSet on no node.
    const arch = (nodeSelector as Record<string, unknown>)["kubernetes.io/arch"];
    if (arch !== undefined && !AGENT_ARCHITECTURES.includes(arch as string))
      c.add(
        "nodeSelector.kubernetes.io/arch",
        `the agent runs only where kubernetes.io/arch is ${AGENT_ARCHITECTURES.join(" or ")} (its kernel program is built for those); remove this entry or name one of them`,
      );
  }
  const tolerations = checkTolerations(c, args.tolerations);
  const affinity = checkAffinity(c, args.affinity);
  const resources = checkResources(c, args.resources);
  checkPodMetadata(c, args.podLabels, args.podAnnotations);
  const updateStrategy = checkUpdateStrategy(c, args.updateStrategy);
  const priorityClassName = args.priorityClassName ?? DEFAULT_PRIORITY_CLASS;
  if (priorityClassName !== "")
    c.name("priorityClassName", priorityClassName, DNS_SUBDOMAIN, "a PriorityClass name");
  const logLevel = args.logLevel ?? "info";
  c.oneOf("logLevel", logLevel, LOG_LEVELS);
  const metricsPort = args.metricsPort ?? DEFAULT_METRICS_PORT;
  if (!Number.isInteger(metricsPort) || metricsPort < 1 || metricsPort > 65535) {
    c.add("metricsPort", `${JSON.stringify(metricsPort)} must be a port number from 1 to 65535`);
  }
  const runtimeSocket = args.runtimeSocket ?? DEFAULT_RUNTIME_SOCKET;
  c.hostPath("runtimeSocket", runtimeSocket);
  const spoolDir = args.spoolDir ?? DEFAULT_SPOOL_DIR;
  c.hostPath("spoolDir", spoolDir);
  const imageLayers = args.imageLayers ?? true;
  if (typeof imageLayers !== "boolean") c.add("imageLayers", "must be true or false");
  const containerdRoot = args.containerdRoot ?? DEFAULT_CONTAINERD_ROOT;
  c.hostPath("containerdRoot", containerdRoot);
  const legacy = args.legacyKernelCapabilities ?? false;
  if (typeof legacy !== "boolean") c.add("legacyKernelCapabilities", "must be true or false");
  const admissionPolicy = args.admissionPolicy ?? true;
  if (typeof admissionPolicy !== "boolean") c.add("admissionPolicy", "must be true or false");
  const quota = args.priorityClassQuota ?? true;
  if (typeof quota !== "boolean") c.add("priorityClassQuota", "must be true or false");
  const podMonitor = checkPodMonitor(c, args.podMonitor);
  const prometheusRule = checkPrometheusRule(c, args.prometheusRule);
  const grafanaDashboard = checkGrafanaDashboard(c, args.grafanaDashboard, DNS_LABEL);
  const reports = checkReports(c, args.reports);
  const deleteCrds = args.deleteCrdsOnDestroy ?? false;
  if (typeof deleteCrds !== "boolean") c.add("deleteCrdsOnDestroy", "must be true or false");

  if (c.problems.length > 0) return { ok: false, problems: c.problems };
  return {
    ok: true,
    config: {
      namespace: namespace.name,
      createNamespace: namespace.create,
      image: args.image,
      imagePullPolicy: pullPolicy,
      imagePullSecrets: pullSecrets,
      callback,
      clusterName: args.clusterName,
      tenantCallbacks,
      policies,
      nodeSelector,
      tolerations,
      affinity,
      resources,
      podLabels: args.podLabels ?? {},
      podAnnotations: args.podAnnotations ?? {},
      updateStrategy,
      priorityClassName: priorityClassName === "" ? undefined : priorityClassName,
      // kube-system admits the critical classes without a quota.
      priorityClassQuota: quota && priorityClassName !== "" && namespace.name !== SYSTEM_NAMESPACE,
      logLevel,
      metricsPort,
      runtimeSocket,
      spoolDir,
      containerdRoot: imageLayers === true ? containerdRoot : undefined,
      legacyKernelCapabilities: legacy,
      admissionPolicy,
      podMonitor,
      prometheusRule,
      grafanaDashboard,
      reports,
      deleteCrdsOnDestroy: deleteCrds,
    },
  };
}
