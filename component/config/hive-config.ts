/** The resolved configuration: what option checking yields and every builder reads. */
import type { HivePolicySpec } from "../../api/index.ts";
import type { ReportFormat } from "../../api/report.ts";
import type {
  Affinity,
  CallbackValues,
  DaemonSetUpdateStrategy,
  GrafanaDashboardArgs,
  LogLevel,
  Plain,
  PodMonitorArgs,
  PrometheusRuleArgs,
  PullPolicy,
  ReportsArgs,
  ResourceRequirements,
  Toleration,
} from "../args.ts";
import type { ArgProblem } from "../builders/problems.ts";

export interface PolicyConfig {
  name: string;
  spec: HivePolicySpec;
}

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
  /** Nodes may share a kernel (kind): the agents of one kernel elect its loader, and believe a node's boot id. */
  sharedKernels: boolean;
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

export type ConfigResult = { ok: true; config: HiveConfig } | { ok: false; problems: ArgProblem[] };
