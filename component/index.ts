/**
 * @hive-operator/hive — Kubernetes-native file-access monitoring with eBPF, as a Pulumi component.
 *
 *   new HiveMonitor("hive", { image, callback: { url }, traps: [{ path: "/etc/shadow", match: { matchLabels: { security: "high" } } }] })
 */
export type {
  Affinity,
  AllowArgs,
  CallbackArgs,
  DaemonSetUpdateStrategy,
  HiveMonitorArgs,
  HiveMonitorValues,
  LogLevel,
  MonitorTrapArgs,
  Plain,
  PodMonitorArgs,
  PullPolicy,
  ResourceRequirements,
  SecretKeyRef,
  Toleration,
  TrapArgs,
  TrapMatchArgs,
} from "./args.ts";
export type { Identity, KubernetesObject } from "./builders/objects.ts";
export type { ArgProblem } from "./builders/problems.ts";
export { type HiveConfig, resolveConfig } from "./config.ts";
export { HIVE_MONITOR_TYPE, HiveMonitor } from "./hive-monitor.ts";
export { HivePolicy, type HivePolicyArgs } from "./hive-policy.ts";
export {
  buildManifests,
  flattenManifests,
  type MonitorManifests,
  type RenderPart,
  renderManifests,
  renderYaml,
} from "./render.ts";
