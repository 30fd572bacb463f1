/**
 * The optional monitoring objects' options: `podMonitor` checked here; `prometheusRule`,
 * `grafanaDashboard` and `reports` in monitoring-config.ts.
 */
import type { HiveMonitorValues, Plain, PodMonitorArgs } from "../args.ts";
import { isPlainObject, unknownKeys } from "../builders/traps.ts";
import { checkGrafanaDashboard, checkPrometheusRule, checkReports } from "../monitoring-config.ts";
import { type Checker, DNS_LABEL } from "./checker.ts";
import type { HiveConfig } from "./hive-config.ts";

export function checkMonitoringOptions(
  c: Checker,
  args: HiveMonitorValues,
): Pick<HiveConfig, "podMonitor" | "prometheusRule" | "grafanaDashboard" | "reports"> {
  return {
    podMonitor: checkPodMonitor(c, args.podMonitor),
    prometheusRule: checkPrometheusRule(c, args.prometheusRule),
    grafanaDashboard: checkGrafanaDashboard(c, args.grafanaDashboard, DNS_LABEL),
    reports: checkReports(c, args.reports),
  };
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
