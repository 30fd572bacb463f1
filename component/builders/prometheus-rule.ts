/**
 * Alerting rules for the agents' own health, as a Prometheus Operator PrometheusRule. Every
 * expression names only metrics the agent exports (runtime/metrics/metrics.ts; a test derives
 * the names from the agent's registry) and selects the monitor's namespace, with the `namespace`
 * and `pod` labels a PodMonitor (`podMonitor`) gives each scraped series, so that two monitors'
 * rules never alert twice for one agent. Only when asked: the kind exists only where the
 * Prometheus Operator's CRDs are installed.
 */
import type { Plain, PrometheusRuleArgs } from "../args.ts";
import { hiveLabels, type KubernetesObject } from "./objects.ts";

export interface AlertRule {
  alert: string;
  expr: string;
  for?: string;
  labels: { severity: "warning" | "critical" };
  annotations: { summary: string; description: string };
}

/** The rule groups (a Prometheus rules file's `groups`): what the PrometheusRule's spec holds. */
export function hiveAlertRules(namespace: string): { groups: { name: string; rules: AlertRule[] }[] } {
  const ns = `namespace="${namespace}"`;
  const agent = "agent {{ $labels.namespace }}/{{ $labels.pod }}";
  const rules = [...agentRules(ns, agent), ...kernelRules(ns, agent), ...alertPipelineRules(ns, agent)];
  return { groups: [{ name: "hive-agent", rules }] };
}

// Each group below takes `ns`, the series selector of the monitor's namespace, and `agent`, the
// alert text naming the agent pod.

/** The agent pods themselves: ready, and not restarting. */
function agentRules(ns: string, agent: string): AlertRule[] {
  return [
    {
      alert: "HiveAgentNotReady",
      expr: `hive_agent_ready{${ns}} == 0`,
      for: "10m",
      labels: { severity: "warning" },
      annotations: {
        summary: `Hive ${agent} is not ready`,
        description:
          "A readiness check has failed for 10 minutes (informers not synced, kernel program not attached, watch map full or alert spool unwritable): accesses on its node may go unreported. Its /readyz?verbose on the metrics port names the failing check; its logs say more.",
      },
    },
    {
      alert: "HiveAgentRestarting",
      expr: `changes(process_start_time_seconds{${ns}}[30m]) > 2 and on (namespace, pod) hive_build_info{${ns}}`,
      labels: { severity: "warning" },
      annotations: {
        summary: `Hive ${agent} restarted {{ $value }} times in 30 minutes`,
        description:
          "The agent keeps restarting: its node is unwatched while it starts. Its previous logs (`kubectl logs --previous`) say why.",
      },
    },
  ];
}

/** The kernel side: events lost or dropped, hooks skipped, files the watch map cannot hold. */
function kernelRules(ns: string, agent: string): AlertRule[] {
  return [
    {
      alert: "HiveKernelEventsLost",
      expr: `increase(hive_kernel_events_lost_total{${ns}}[10m]) > 0`,
      labels: { severity: "critical" },
      annotations: {
        summary: `Hive ${agent} lost {{ $value | humanize }} kernel events in 10 minutes`,
        description:
          "The kernel ring buffer was full: accesses to trapped files happened that no alert reports. The agent cannot keep up with the events (a flood, or a starved pod).",
      },
    },
    {
      alert: "HiveKernelProgramMisses",
      expr: `increase(hive_kernel_program_misses_total{${ns}}[10m]) > 0`,
      labels: { severity: "warning" },
      annotations: {
        summary: `Hive ${agent}: the kernel skipped {{ $value | humanize }} runs of its hooks in 10 minutes`,
        description:
          "The kernel did not run Hive's program for some permission checks (it was already running on that CPU: fentry recursion, or kprobes since Linux 6.7): accesses in those checks were not seen.",
      },
    },
    {
      alert: "HiveUpgradeDiscardedEvents",
      expr: `increase(hive_kernel_upgrade_discarded_total{${ns}}[1h]) > 0`,
      labels: { severity: "warning" },
      annotations: {
        summary: `Hive ${agent} could not read {{ $value | humanize }} events an earlier version left`,
        description:
          "An upgrade changed the kernel maps' layout: the events and bursts the earlier version left unread were counted and lost.",
      },
    },
    {
      alert: "HiveKernelEventsDropped",
      // unmatched (a trap removed while its event was in flight) and unselected (an image layer's
      // file read by a container no trap applies to) are expected; the others lose an access.
      expr: `increase(hive_kernel_events_dropped_total{${ns},reason!~"unmatched|unselected"}[10m]) > 0`,
      labels: { severity: "warning" },
      annotations: {
        summary: `Hive ${agent} dropped kernel events before alerting ({{ $labels.reason }})`,
        description:
          "hold_full: more events came before the first sync after a restart than the agent holds; pipeline_error: the alert pipeline failed on an event (the agent logged it); unattributed: an access to an image layer's trapped file from a container this node could not name.",
      },
    },
    {
      alert: "HiveFilesNotWatched",
      expr: `hive_unwatched_files{${ns}} > 0`,
      for: "10m",
      labels: { severity: "warning" },
      annotations: {
        summary: `Hive ${agent}: {{ $value }} trapped files do not fit the kernel watch map`,
        description:
          "The program's watch map is full, so accesses to these files are missed. `hive status` on the node lists them as NOT WATCHED; fewer traps or containers per node make room.",
      },
    },
  ];
}

/** Alerts on their way out: the spool and the deliveries to callbacks. */
function alertPipelineRules(ns: string, agent: string): AlertRule[] {
  return [
    {
      alert: "HiveSpoolFilling",
      expr: `hive_spool_bytes{${ns}} / hive_spool_capacity_bytes{${ns}} > 0.8 and hive_spool_capacity_bytes{${ns}} > 0`,
      for: "15m",
      labels: { severity: "warning" },
      annotations: {
        summary: `Hive ${agent}: the alert spool is {{ $value | humanizePercentage }} full`,
        description:
          "Alerts wait because their callbacks do not take them; once the spool is full the oldest are dropped.",
      },
    },
    {
      alert: "HiveSpoolNotWritable",
      expr: `increase(hive_spool_write_errors_total{${ns}}[10m]) > 0`,
      labels: { severity: "warning" },
      annotations: {
        summary: `Hive ${agent} cannot write its alert spool ({{ $labels.reason }})`,
        description:
          "Undelivered alerts wait in memory meanwhile and are lost if the agent restarts. Check the spool directory's disk on the node (spoolDir).",
      },
    },
    {
      alert: "HiveAlertDeliveryFailing",
      expr: `sum by (namespace, pod, destination) (rate(hive_alert_delivery_failures_total{${ns}}[10m])) / sum by (namespace, pod, destination) (rate(hive_alert_delivery_attempts_total{${ns}}[10m])) > 0.5`,
      for: "15m",
      labels: { severity: "warning" },
      annotations: {
        summary: `Hive ${agent}: most deliveries to {{ $labels.destination }} fail`,
        description:
          "Alerts are retried and spooled meanwhile. hive_alert_delivery_failures_total's class label and the agent's logs say why (refused, timeout, tls, http_4xx…).",
      },
    },
    {
      alert: "HiveAlertsDropped",
      expr: `increase(hive_alerts_dropped_total{${ns}}[10m]) > 0`,
      labels: { severity: "critical" },
      annotations: {
        summary: `Hive ${agent} dropped {{ $value | humanize }} alerts ({{ $labels.reason }})`,
        description:
          "These alerts will never reach their callback: the spool was full or unwritable, the receiver refused them for good, or they were too large.",
      },
    },
  ];
}

export function prometheusRuleManifest(
  namespace: string,
  settings: Plain<PrometheusRuleArgs>,
): KubernetesObject {
  return {
    apiVersion: "monitoring.coreos.com/v1",
    kind: "PrometheusRule",
    metadata: { name: "hive-agent", namespace, labels: { ...settings.labels, ...hiveLabels("agent") } },
    spec: hiveAlertRules(namespace),
  };
}
