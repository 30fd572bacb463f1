/**
 * A Grafana dashboard of the agents, in a ConfigMap labelled for Grafana's dashboard sidecar
 * (kube-prometheus-stack and the Grafana chart load ConfigMaps labelled `grafana_dashboard: "1"`
 * by default). Every query names only metrics the agent exports (a test derives the names from
 * the agent's registry). The JSON can also be imported by hand: `kubectl get configmap
 * hive-dashboard -o jsonpath='{.data.hive\.json}'`.
 */
import type { GrafanaDashboardArgs, Plain } from "../args.ts";
import { hiveLabels, type KubernetesObject } from "./objects.ts";

/** The label Grafana's dashboard sidecar selects by default. */
export const DEFAULT_DASHBOARD_LABELS: Record<string, string> = { grafana_dashboard: "1" };
export const DASHBOARD_FILE = "hive.json";

const WIDTH = 24;
const HEIGHT = 8;

interface Panel {
  title: string;
  type: "timeseries" | "stat" | "table";
  /** PromQL per series, with its legend. */
  targets: { expr: string; legend?: string; instant?: boolean }[];
  unit?: string;
  width?: number;
  description?: string;
}

/** The agents' namespace is a variable, so one dashboard serves several monitors. */
const sel = 'namespace="$namespace"';
const rate = (metric: string, by = "pod") => `sum by (${by}) (rate(${metric}{${sel}}[$__rate_interval]))`;

const PANELS: Panel[] = [
  {
    title: "Agents",
    type: "table",
    width: 12,
    description: "One row per agent: version, compiled program (as `hive version` prints it), Node.js.",
    targets: [{ expr: `hive_build_info{${sel}}`, instant: true }],
  },
  {
    title: "Agents ready",
    type: "stat",
    width: 12,
    description: "Agents whose readiness checks all pass, of those scraped.",
    targets: [
      { expr: `sum(hive_agent_ready{${sel}})`, legend: "ready" },
      { expr: `count(hive_agent_ready{${sel}})`, legend: "scraped" },
    ],
  },
  {
    title: "Alerts produced",
    type: "timeseries",
    unit: "ops",
    targets: [
      {
        expr: rate("hive_alerts_total", "policy_namespace, policy"),
        legend: "{{policy_namespace}}/{{policy}}",
      },
    ],
  },
  {
    title: "Deliveries",
    type: "timeseries",
    unit: "ops",
    width: 12,
    targets: [
      { expr: rate("hive_alerts_delivered_total", "destination"), legend: "delivered {{destination}}" },
      {
        expr: rate("hive_alert_delivery_failures_total", "destination, class"),
        legend: "failed {{destination}} {{class}}",
      },
      { expr: rate("hive_alerts_dropped_total", "reason"), legend: "dropped {{reason}}" },
    ],
  },
  {
    title: "Delivery latency (p99)",
    type: "timeseries",
    unit: "s",
    width: 12,
    targets: [
      {
        expr: `histogram_quantile(0.99, sum by (le, destination) (rate(hive_alert_delivery_latency_seconds_bucket{${sel}}[$__rate_interval])))`,
        legend: "{{destination}}",
      },
    ],
  },
  {
    title: "Alert spool",
    type: "timeseries",
    unit: "percentunit",
    width: 12,
    description: "Share of each agent's spool bound in use; the oldest alerts are dropped at 100%.",
    targets: [{ expr: `hive_spool_bytes{${sel}} / hive_spool_capacity_bytes{${sel}}`, legend: "{{pod}}" }],
  },
  {
    title: "Kernel events",
    type: "timeseries",
    unit: "ops",
    width: 12,
    targets: [
      { expr: rate("hive_kernel_events_total"), legend: "emitted {{pod}}" },
      { expr: rate("hive_kernel_events_lost_total"), legend: "lost {{pod}}" },
      { expr: rate("hive_kernel_events_dropped_total", "pod, reason"), legend: "dropped {{pod}} {{reason}}" },
    ],
  },
  {
    title: "Watched files",
    type: "timeseries",
    width: 12,
    targets: [
      { expr: `hive_watched_files{${sel}}`, legend: "watched {{pod}}" },
      { expr: `hive_unwatched_files{${sel}}`, legend: "no room {{pod}}" },
    ],
  },
  {
    title: "Reconcile duration (p99)",
    type: "timeseries",
    unit: "s",
    width: 12,
    targets: [
      {
        expr: `histogram_quantile(0.99, sum by (le, controller) (rate(hive_reconcile_duration_seconds_bucket{${sel}}[$__rate_interval])))`,
        legend: "{{controller}}",
      },
    ],
  },
  {
    title: "CPU",
    type: "timeseries",
    unit: "percentunit",
    width: 8,
    targets: [
      {
        expr: `${rate("process_cpu_seconds_total")} and on (pod) hive_build_info{${sel}}`,
        legend: "{{pod}}",
      },
    ],
  },
  {
    title: "Memory (RSS)",
    type: "timeseries",
    unit: "bytes",
    width: 8,
    targets: [
      {
        expr: `process_resident_memory_bytes{${sel}} and on (namespace, pod) hive_build_info`,
        legend: "{{pod}}",
      },
    ],
  },
  {
    title: "Event-loop lag (p99)",
    type: "timeseries",
    unit: "s",
    width: 8,
    targets: [
      {
        expr: `nodejs_eventloop_lag_p99_seconds{${sel}} and on (namespace, pod) hive_build_info`,
        legend: "{{pod}}",
      },
    ],
  },
];

/** Grafana's dashboard model (schemaVersion 39): panels laid out left to right, row by row. */
export function hiveDashboard(): Record<string, unknown> {
  // Grafana's own variable syntax (the data source picked on the dashboard), not a template literal.
  // biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana interpolates it
  const datasource = { type: "prometheus", uid: "${datasource}" };
  let x = 0;
  let y = 0;
  const panels = PANELS.map((p, id) => {
    const w = p.width ?? WIDTH;
    if (x + w > WIDTH) {
      x = 0;
      y += HEIGHT;
    }
    const gridPos = { x, y, w, h: HEIGHT };
    x += w;
    return {
      id: id + 1,
      title: p.title,
      type: p.type,
      ...(p.description ? { description: p.description } : {}),
      datasource,
      gridPos,
      fieldConfig: { defaults: p.unit ? { unit: p.unit } : {}, overrides: [] },
      targets: p.targets.map((t, i) => ({
        refId: String.fromCharCode(65 + i),
        datasource,
        expr: t.expr,
        ...(t.legend ? { legendFormat: t.legend } : {}),
        ...(t.instant ? { instant: true, format: "table" } : {}),
      })),
    };
  });
  return {
    uid: "hive-agents",
    title: "Hive agents",
    tags: ["hive"],
    schemaVersion: 39,
    editable: true,
    time: { from: "now-6h", to: "now" },
    refresh: "1m",
    templating: {
      list: [
        { name: "datasource", label: "Data source", type: "datasource", query: "prometheus" },
        {
          name: "namespace",
          label: "Namespace",
          type: "query",
          datasource,
          query: "label_values(hive_build_info, namespace)",
          refresh: 2,
        },
      ],
    },
    panels,
  };
}

export function grafanaDashboardManifest(
  namespace: string,
  settings: Plain<GrafanaDashboardArgs>,
): KubernetesObject {
  return {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: {
      name: "hive-dashboard",
      namespace: settings.namespace ?? namespace,
      labels: { ...(settings.labels ?? DEFAULT_DASHBOARD_LABELS), ...hiveLabels("dashboard") },
    },
    data: { [DASHBOARD_FILE]: `${JSON.stringify(hiveDashboard(), null, 2)}\n` },
  };
}
