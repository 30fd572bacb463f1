/**
 * The options of the monitor's optional monitoring objects beyond the PodMonitor: the
 * PrometheusRule, the Grafana dashboard and the PolicyReports. Checked like every option (config.ts), each
 * problem naming its option.
 */

import { DEFAULT_REPORT_FORMAT, REPORT_FORMAT_NAMES, type ReportFormat } from "../api/report.ts";
import type { GrafanaDashboardArgs, Plain, PrometheusRuleArgs, ReportsArgs } from "./args.ts";
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

/** The reports, with their format; undefined when `none`. */
export function checkReports(
  c: Checker,
  value: unknown,
): (Plain<ReportsArgs> & { format: ReportFormat }) | undefined {
  const formats = REPORT_FORMAT_NAMES.map((f) => `"${f}"`).join(", ");
  if (value === "none") return undefined;
  if (value === undefined) return { format: DEFAULT_REPORT_FORMAT };
  if (typeof value === "string") {
    if ((REPORT_FORMAT_NAMES as string[]).includes(value)) return { format: value as ReportFormat };
    c.add("reports", `${JSON.stringify(value)} must be ${formats} or "none"`);
    return undefined;
  }
  if (!isPlainObject(value)) {
    c.add("reports", `must be ${formats}, "none" or { format?, installCrd?: true, failWindowHours?: 168 }`);
    return undefined;
  }
  c.problems.push(...unknownKeys(value, ["format", "installCrd", "failWindowHours"], "reports"));
  if (value.format === "none") return undefined;
  const format = (value.format ?? DEFAULT_REPORT_FORMAT) as ReportFormat;
  if (!(REPORT_FORMAT_NAMES as unknown[]).includes(format))
    c.add("reports.format", `${JSON.stringify(value.format)} must be ${formats} or "none"`);
  if (value.installCrd !== undefined && typeof value.installCrd !== "boolean")
    c.add("reports.installCrd", "must be true or false");
  const hours = value.failWindowHours;
  if (hours !== undefined && (!Number.isInteger(hours) || (hours as number) < 1 || (hours as number) > 8760))
    c.add("reports.failWindowHours", "must be a whole number of hours from 1 to 8760 (a year), e.g. 168");
  return { ...(value as Plain<ReportsArgs>), format };
}
