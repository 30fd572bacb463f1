/**
 * The options of the monitor's optional monitoring objects beyond the PodMonitor: the
 * PrometheusRule and the Grafana dashboard. Checked like every option (config.ts), each
 * problem naming its option.
 */
import type { GrafanaDashboardArgs, Plain, PrometheusRuleArgs } from "./args.ts";
import { isPlainObject, unknownKeys } from "./builders/traps.ts";
import type { Checker } from "./config.ts";

export function checkPrometheusRule(c: Checker, value: unknown): Plain<PrometheusRuleArgs> | undefined {
  if (value === undefined || value === false) return undefined;
  if (value === true) return {};
  if (!isPlainObject(value)) {
    c.add("prometheusRule", 'must be true or { labels?: { release: "prometheus" } }');
    return undefined;
  }
  c.problems.push(...unknownKeys(value, ["labels"], "prometheusRule"));
  if (value.labels !== undefined) c.labels("prometheusRule.labels", value.labels);
  return value as Plain<PrometheusRuleArgs>;
}

export function checkGrafanaDashboard(
  c: Checker,
  value: unknown,
  namePattern: RegExp,
): Plain<GrafanaDashboardArgs> | undefined {
  if (value === undefined || value === false) return undefined;
  if (value === true) return {};
  if (!isPlainObject(value)) {
    c.add(
      "grafanaDashboard",
      'must be true or { namespace?: "monitoring", labels?: { grafana_dashboard: "1" } }',
    );
    return undefined;
  }
  c.problems.push(...unknownKeys(value, ["namespace", "labels"], "grafanaDashboard"));
  if (value.namespace !== undefined)
    c.name("grafanaDashboard.namespace", value.namespace, namePattern, "a namespace name");
  if (value.labels !== undefined) c.labels("grafanaDashboard.labels", value.labels);
  return value as Plain<GrafanaDashboardArgs>;
}
