/**
 * HiveMonitorArgs → a complete, validated configuration with every default filled in. All
 * problems are collected (not just the first) so a user fixes them in one round; callers turn
 * them into a `pulumi.ResourceError` (the component) or a HiveError (`hive render`).
 *
 * Each group of options is checked in config/ (defaults in config/defaults.ts); this module
 * runs the groups in order and assembles what they yield.
 */
import { type HiveMonitorValues, MONITOR_OPTIONS } from "./args.ts";
import { SYSTEM_NAMESPACE } from "./builders/resource-quota.ts";
import { isPlainObject, unknownKeys } from "./builders/traps.ts";
import { checkAgentOptions } from "./config/agent.ts";
import { checkAlertOptions } from "./config/alerts.ts";
import { Checker } from "./config/checker.ts";
import type { ConfigResult } from "./config/hive-config.ts";
import { checkImage } from "./config/image.ts";
import { checkMonitoringOptions } from "./config/monitoring.ts";
import { checkNamespace } from "./config/namespace.ts";
import { checkPodOptions } from "./config/pod.ts";
import { groupTraps } from "./config/traps.ts";

export { Checker, DNS_LABEL, DNS_SUBDOMAIN } from "./config/checker.ts";
export {
  DEFAULT_CONTAINERD_ROOT,
  DEFAULT_METRICS_PORT,
  DEFAULT_NAMESPACE,
  DEFAULT_POLICY,
  DEFAULT_PRIORITY_CLASS,
  DEFAULT_RESOURCES,
  DEFAULT_RUNTIME_SOCKET,
  DEFAULT_SPOOL_DIR,
  DEFAULT_TOLERATIONS,
  DEFAULT_UPDATE_STRATEGY,
} from "./config/defaults.ts";
export type { ConfigResult, HiveConfig, PolicyConfig } from "./config/hive-config.ts";

/** Validate every option and fill in the defaults. */
export function resolveConfig(args: HiveMonitorValues): ConfigResult {
  if (!isPlainObject(args)) {
    return {
      ok: false,
      problems: [{ option: "(args)", message: "must be an object with at least { image }" }],
    };
  }
  const c = new Checker();
  // Problems are reported in the order these checks run (tests and users see that order).
  c.problems.push(...unknownKeys(args, MONITOR_OPTIONS, ""));
  const namespace = checkNamespace(c, args.namespace);
  const image = checkImage(c, args);
  const alerts = checkAlertOptions(c, args);
  const policies = groupTraps(c, args.traps);
  const pod = checkPodOptions(c, args);
  const agent = checkAgentOptions(c, args);
  const admissionPolicy = args.admissionPolicy ?? true;
  c.flag("admissionPolicy", admissionPolicy);
  const quota = args.priorityClassQuota ?? true;
  c.flag("priorityClassQuota", quota);
  const monitoring = checkMonitoringOptions(c, args);
  const deleteCrdsOnDestroy = args.deleteCrdsOnDestroy ?? false;
  c.flag("deleteCrdsOnDestroy", deleteCrdsOnDestroy);

  if (c.problems.length > 0) return { ok: false, problems: c.problems };
  return {
    ok: true,
    config: {
      namespace: namespace.name,
      createNamespace: namespace.create,
      ...image,
      ...alerts,
      policies,
      ...pod,
      // kube-system admits the critical classes without a quota.
      priorityClassQuota: quota && pod.priorityClassName !== undefined && namespace.name !== SYSTEM_NAMESPACE,
      ...agent,
      admissionPolicy,
      ...monitoring,
      deleteCrdsOnDestroy,
    },
  };
}
