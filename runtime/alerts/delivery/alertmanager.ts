/**
 * Alertmanager's v2 API (`POST /api/v2/alerts`, a JSON array of postable alerts): the body of
 * callback format `alertmanager`. Labels are what Alertmanager routes, groups and deduplicates
 * on, so they hold only what names the trap and the container (never the process or a per-access
 * value): repeated accesses of one trap in one container update one Alertmanager alert, whose
 * annotations describe the latest. Alertmanager ends an alert it no longer receives after its
 * `resolve_timeout`, since an access has no end.
 */
import type { Alert } from "../../../api/alert.ts";
import { alertSummary, summaryParts } from "../alert-summary.ts";

/** The path Alertmanager takes alerts at, appended to the callback URL unless it ends with it. */
export const ALERTMANAGER_ALERTS_PATH = "/api/v2/alerts";
export const ALERTNAME = "HiveFileAccess";

/** A postable alert (Alertmanager's OpenAPI `postableAlert`). */
export interface PostableAlert {
  labels: Record<string, string>;
  annotations: Record<string, string>;
  startsAt: string;
  endsAt?: string;
  generatorURL?: string;
}

/**
 * A Kubernetes label name (`team`, `example.com/team`) as a Prometheus label name, which allows
 * only letters, digits and `_` and no leading digit: `example_com_team`.
 */
export function prometheusLabelName(name: string): string {
  const out = name.replace(/[^A-Za-z0-9_]/g, "_");
  return /^[0-9]/.test(out) ? `_${out}` : out;
}

/** The callback URL with Alertmanager's alerts path: `http://am:9093` → `http://am:9093/api/v2/alerts`. */
export function alertmanagerUrl(url: string): string {
  const u = new URL(url);
  if (!u.pathname.endsWith(ALERTMANAGER_ALERTS_PATH))
    u.pathname = `${u.pathname.replace(/\/+$/, "")}${ALERTMANAGER_ALERTS_PATH}`;
  return u.toString();
}

export function toPostableAlert(alert: Alert): PostableAlert {
  // The trap's own labels first: Hive's names win where they collide.
  const labels: Record<string, string> = {};
  for (const [k, v] of Object.entries(alert.labels ?? {})) labels[prometheusLabelName(k)] = v;
  Object.assign(labels, {
    alertname: ALERTNAME,
    severity: alert.severity,
    trap: alert.trap_id,
    policy: alert.hive_policy_name,
  });
  if (alert.hive_policy_namespace) labels.policy_namespace = alert.hive_policy_namespace;
  if (alert.cluster) labels.cluster = alert.cluster.name;
  if (alert.pod) {
    labels.namespace = alert.pod.namespace;
    labels.pod = alert.pod.name;
    labels.container = alert.pod.container.name;
  } else {
    labels.node = alert.node.name;
  }
  const p = summaryParts(alert);
  const details = [
    `file ${p.path}`,
    `accesses ${p.accesses} (${alert.metadata.count} checks)`,
    `process ${p.process} pid ${p.pid} uid ${p.uid}`,
    `node ${alert.node.name}`,
    ...(p.workload ? [`workload ${p.workload}`] : []),
    ...(p.image ? [`image ${p.image}`] : []),
  ];
  const annotations: Record<string, string> = {
    summary: alertSummary(alert),
    description: details.join("\n"),
    alert_id: alert.id,
    path: p.path,
  };
  if (p.workload) annotations.workload = p.workload;
  if (p.image) annotations.image = p.image;
  return { labels, annotations, startsAt: alert.timestamp };
}

/** The request body: a one-alert array. */
export function alertmanagerBody(alertJson: string): string {
  return JSON.stringify([toPostableAlert(JSON.parse(alertJson) as Alert)]);
}
