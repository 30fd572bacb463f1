/**
 * The monitor's optional monitoring outputs: a PrometheusRule of the agents' health and a
 * Grafana dashboard, created by the component and printed by `hive render` when asked. Their
 * queries may name only metrics the agent exports: the names are extracted from the rendered
 * objects and looked up in the agent's own registry (createHiveMetrics). The rules pass
 * `promtool check rules`, and `promtool test rules` turns input series into the expected alerts.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseAllDocuments, stringify } from "yaml";
import { DASHBOARD_FILE } from "../../component/builders/grafana-dashboard.ts";
import type { KubernetesObject } from "../../component/builders/objects.ts";
import type { AlertRule } from "../../component/builders/prometheus-rule.ts";
import { HiveMonitor, type HiveMonitorArgs, renderManifests } from "../../component/index.ts";
import { createHiveMetrics } from "../../runtime/metrics/metrics.ts";
import { runHive } from "../cli/run-hive.ts";
import { MINIMAL } from "./configs.ts";
import { installMocks, type RecordedResource, resolve, settle } from "./pulumi-mocks.ts";

const recorded = installMocks();

const WITH_BOTH: HiveMonitorArgs = { ...MINIMAL, prometheusRule: true, grafanaDashboard: true };

function rendered(args: HiveMonitorArgs, kind: string): KubernetesObject {
  const found = renderManifests(args).filter((o) => o.kind === kind);
  expect(found, kind).toHaveLength(1);
  return found[0] as KubernetesObject;
}

type Rules = { groups: { name: string; rules: { alert: string; expr: string }[] }[] };
const rulesOf = (args: HiveMonitorArgs) => rendered(args, "PrometheusRule").spec as Rules;
type Dashboard = {
  panels: { targets: { expr: string }[] }[];
  templating: { list: { query: string; type: string }[] };
};
const dashboardOf = (args: HiveMonitorArgs) =>
  JSON.parse((rendered(args, "ConfigMap").data as Record<string, string>)[DASHBOARD_FILE] ?? "") as Dashboard;

/**
 * Every series name the agent's registry exposes, read from its exposition text as Prometheus
 * scrapes it (a histogram as its _bucket, _sum and _count series).
 */
async function exportedSeries(): Promise<Set<string>> {
  const text = await createHiveMetrics().registry.metrics();
  const names = new Set<string>();
  for (const [, name = "", type] of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    if (type === "histogram") for (const s of ["_bucket", "_sum", "_count"]) names.add(`${name}${s}`);
    else if (type === "summary") for (const s of ["", "_sum", "_count"]) names.add(`${name}${s}`);
    else names.add(name);
  }
  return names;
}

/** PromQL's words that are not metric names where they stand without a call's parenthesis. */
const PROMQL_WORDS = new Set([
  "and",
  "or",
  "unless",
  "bool",
  "offset",
  "by",
  "without",
  "on",
  "ignoring",
  "group_left",
  "group_right",
]);

/**
 * The metric names a PromQL expression (or a Grafana query) selects: identifiers left once
 * strings, label matchers, ranges, grouping clauses and Grafana variables are removed, except
 * function and aggregation names (followed by a parenthesis) and PromQL's keywords.
 */
function metricNames(expr: string): string[] {
  const stripped = expr
    .replace(/label_values\(\s*([^,)]+)\s*,[^)]*\)/g, "$1") // Grafana: label_values(metric, label)
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/g, "")
    .replace(/\{[^}]*\}/g, "")
    .replace(/\[[^\]]*\]/g, "")
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, " ")
    .replace(/\$\{?\w+\}?/g, "");
  const names: string[] = [];
  for (const m of stripped.matchAll(/(?<![\w.])([a-zA-Z_:][\w:]*)(\s*\()?/g)) {
    const [, name = "", call] = m;
    if (call || PROMQL_WORDS.has(name)) continue;
    names.push(name);
  }
  return names;
}

function promtool(args: string[], cwd: string) {
  const run = spawnSync("promtool", args, { cwd, encoding: "utf8", timeout: 60_000 });
  // Not a skip, locally or in CI: the rules are unchecked without it.
  if (run.error)
    throw new Error(
      `promtool cannot run (${run.error.message}): install Debian's prometheus package (scripts/debian-packages.txt; scripts/bootstrap.sh installs it)`,
    );
  return run;
}

async function run(name: string, args: HiveMonitorArgs): Promise<RecordedResource[]> {
  const monitor = new HiveMonitor(name, args);
  await resolve(monitor.daemonSetName);
  await settle(recorded);
  return recorded.filter((r) => r.name === name || r.name.startsWith(`${name}-`));
}

describe("the monitor's PrometheusRule and Grafana dashboard", () => {
  it("are created only when asked, with the labels their selectors need, after the agent", async () => {
    const plain = await run("plain", MINIMAL);
    expect(plain.map((r) => r.type)).not.toContain("kubernetes:monitoring.coreos.com/v1:PrometheusRule");
    expect(plain.map((r) => r.type)).not.toContain("kubernetes:core/v1:ConfigMap");

    const resources = await run("watched", {
      ...MINIMAL,
      prometheusRule: { labels: { release: "prometheus" } },
      grafanaDashboard: { namespace: "monitoring" },
    });
    const ds = resources.find((r) => r.type === "kubernetes:apps/v1:DaemonSet");
    const rule = resources.find((r) => r.type === "kubernetes:monitoring.coreos.com/v1:PrometheusRule");
    const dashboard = resources.find((r) => r.type === "kubernetes:core/v1:ConfigMap");
    expect(rule?.inputs.metadata).toMatchObject({
      name: "hive-agent",
      namespace: "hive-system",
      labels: { release: "prometheus" },
    });
    expect(dashboard?.inputs.metadata).toMatchObject({
      name: "hive-dashboard",
      namespace: "monitoring",
      labels: { grafana_dashboard: "1" },
    });
    expect(JSON.parse(dashboard?.inputs.data[DASHBOARD_FILE]).title).toBe("Hive agents");
    // Deleted before the agent on destroy, as the PodMonitor is.
    expect(rule?.dependsOn).toContain(ds?.name);
    expect(dashboard?.dependsOn).toContain(ds?.name);
  });

  it("replaces the sidecar's default label with the labels given", () => {
    const cm = rendered(
      { ...MINIMAL, grafanaDashboard: { labels: { "grafana.example.com/dashboard": "hive" } } },
      "ConfigMap",
    );
    expect(cm.metadata.labels).toMatchObject({ "grafana.example.com/dashboard": "hive" });
    expect(cm.metadata.labels?.grafana_dashboard).toBeUndefined();
  });

  it("select the monitor's namespace in every rule", () => {
    const rules = rulesOf({ ...WITH_BOTH, namespace: "security" }).groups.flatMap((g) => g.rules);
    for (const rule of rules) expect(rule.expr, rule.alert).toContain('namespace="security"');
  });

  it("are printed by hive render when the config asks for them", { timeout: 60_000 }, async () => {
    const out = await runHive(["render", "--config", "-"], { input: stringify(WITH_BOTH) });
    expect(out.code).toBe(0);
    const kinds = parseAllDocuments(out.stdout as string).map((d) => (d.toJS() as KubernetesObject).kind);
    expect(kinds).toEqual(expect.arrayContaining(["PrometheusRule", "ConfigMap", "ResourceQuota"]));
  });
});

describe("the metric names the rules and the dashboard query", () => {
  it("are found by the extractor, which flags a name the agent does not export", () => {
    expect(
      metricNames(
        'sum by (namespace, pod) (rate(hive_x_total{reason!="a"}[5m])) / on (pod) group_left hive_y > 0 and label_values(hive_z, namespace)',
      ).sort(),
    ).toEqual(["hive_x_total", "hive_y", "hive_z"]);
  });

  it("are all exported by the agent's registry", async () => {
    const exported = await exportedSeries();
    const rules = rulesOf(WITH_BOTH).groups.flatMap((g) => g.rules);
    const dashboard = dashboardOf(WITH_BOTH);
    const queries = [
      ...rules.map((r) => ({ where: `rule ${r.alert}`, expr: r.expr })),
      ...dashboard.panels.flatMap((p, i) =>
        p.targets.map((t) => ({ where: `panel ${i + 1}`, expr: t.expr })),
      ),
      ...dashboard.templating.list
        .filter((v) => v.type === "query")
        .map((v) => ({ where: "templating", expr: v.query })),
    ];
    expect(queries.length).toBeGreaterThan(20);
    const unknown: string[] = [];
    for (const q of queries) {
      const names = metricNames(q.expr);
      expect(names.length, `${q.where} names no metric: ${q.expr}`).toBeGreaterThan(0);
      for (const name of names) if (!exported.has(name)) unknown.push(`${q.where}: ${name}`);
    }
    expect(unknown).toEqual([]);
  });
});

describe("promtool", () => {
  const dir = mkdtempSync(join(tmpdir(), "hive-rules-"));
  writeFileSync(join(dir, "rules.yaml"), stringify(rulesOf(WITH_BOTH)));

  it("checks the rendered rules", () => {
    const check = promtool(["check", "rules", "rules.yaml"], dir);
    expect(check.stderr).toBe("");
    expect(check.stdout).toMatch(/SUCCESS: \d+ rules found/);
    expect(check.status).toBe(0);
  });

  it("fires the rules on the series that call for them, and not before", () => {
    const agent = 'namespace="hive-system",pod="hive-agent-x1"';
    const labels = { namespace: "hive-system", pod: "hive-agent-x1" };
    const rules = rulesOf(WITH_BOTH).groups.flatMap((g) => g.rules) as AlertRule[];
    /** What promtool must see: the rule's labels, its templated summary, its description as written. */
    const expected = (alert: string, summary: string) => {
      const rule = rules.find((r) => r.alert === alert);
      return {
        exp_labels: { ...labels, ...rule?.labels },
        exp_annotations: { summary, description: rule?.annotations.description },
      };
    };
    const tests = {
      rule_files: ["rules.yaml"],
      evaluation_interval: "1m",
      tests: [
        {
          interval: "1m",
          input_series: [
            // Ring-buffer losses from minute 20 on, 1 per minute.
            { series: `hive_kernel_events_lost_total{${agent}}`, values: "0x20 1+1x20" },
            // Not ready from minute 5.
            { series: `hive_agent_ready{${agent}}`, values: "1x4 0x30" },
            // A spool at 90% of its bound from the start.
            { series: `hive_spool_bytes{${agent}}`, values: "900x30" },
            { series: `hive_spool_capacity_bytes{${agent}}`, values: "1000x30" },
            // Image-layer accesses by containers no trap selects (expected), then one that no container claims.
            { series: `hive_kernel_events_dropped_total{${agent},reason="unselected"}`, values: "0+5x30" },
            {
              series: `hive_kernel_events_dropped_total{${agent},reason="unattributed"}`,
              values: "0x20 1x10",
            },
          ],
          alert_rule_test: [
            { eval_time: "15m", alertname: "HiveKernelEventsLost", exp_alerts: [] },
            {
              eval_time: "30m",
              alertname: "HiveKernelEventsLost",
              exp_alerts: [
                expected(
                  "HiveKernelEventsLost",
                  "Hive agent hive-system/hive-agent-x1 lost 10 kernel events in 10 minutes",
                ),
              ],
            },
            { eval_time: "12m", alertname: "HiveAgentNotReady", exp_alerts: [] },
            {
              eval_time: "16m",
              alertname: "HiveAgentNotReady",
              exp_alerts: [
                expected("HiveAgentNotReady", "Hive agent hive-system/hive-agent-x1 is not ready"),
              ],
            },
            { eval_time: "15m", alertname: "HiveKernelEventsDropped", exp_alerts: [] },
            {
              eval_time: "25m",
              alertname: "HiveKernelEventsDropped",
              exp_alerts: [
                {
                  ...expected(
                    "HiveKernelEventsDropped",
                    "Hive agent hive-system/hive-agent-x1 dropped kernel events before alerting (unattributed)",
                  ),
                  exp_labels: {
                    ...expected("HiveKernelEventsDropped", "").exp_labels,
                    reason: "unattributed",
                  },
                },
              ],
            },
            { eval_time: "10m", alertname: "HiveSpoolFilling", exp_alerts: [] },
            {
              eval_time: "20m",
              alertname: "HiveSpoolFilling",
              exp_alerts: [
                expected(
                  "HiveSpoolFilling",
                  "Hive agent hive-system/hive-agent-x1: the alert spool is 90% full",
                ),
              ],
            },
          ],
        },
      ],
    };
    writeFileSync(join(dir, "tests.yaml"), stringify(tests));
    const test = promtool(["test", "rules", "tests.yaml"], dir);
    expect(test.stdout + test.stderr).toContain("SUCCESS");
    expect(test.status).toBe(0);
  });
});
