/**
 * One line a person reads about an alert, for the formats that show text (Alertmanager's
 * `summary`, Slack's message). What the container chose (path, executable, comm) goes through
 * displaySafe (runtime/text.ts); the alert itself keeps the exact bytes.
 */
import type { Alert } from "../../api/alert.ts";
import { displaySafe } from "../text.ts";

/** The parts of the summary, each already safe to show and bounded. */
export interface AlertSummaryParts {
  /** "read/open" */
  accesses: string;
  path: string;
  /** The executable the kernel recorded, else the thread's comm. */
  process: string;
  pid: number;
  uid: number;
  /** "namespace/pod", or the node for a host path. */
  where: string;
  container?: string;
  /** "Deployment/nginx" */
  workload?: string;
  image?: string;
}

export function summaryParts(alert: Alert): AlertSummaryParts {
  const parts: AlertSummaryParts = {
    accesses: alert.metadata.accesses.length > 0 ? alert.metadata.accesses.join("/") : "access",
    path: displaySafe(alert.metadata.path, 384),
    process: displaySafe(alert.process.exe ?? alert.process.comm, 256),
    pid: alert.process.tgid,
    uid: alert.process.uid,
    where: alert.pod ? `${alert.pod.namespace}/${alert.pod.name}` : `node ${alert.node.name}`,
  };
  if (alert.pod?.container.name) parts.container = alert.pod.container.name;
  if (alert.pod?.workload) parts.workload = `${alert.pod.workload.kind}/${alert.pod.workload.name}`;
  if (alert.pod?.container.image) parts.image = displaySafe(alert.pod.container.image, 256);
  return parts;
}

/** "read/open of /etc/shadow by /usr/bin/cat (pid 4242, uid 0) in default/nginx-7d9c, container nginx" */
export function alertSummary(alert: Alert): string {
  const p = summaryParts(alert);
  const container = p.container ? `, container ${p.container}` : "";
  return `${p.accesses} of ${p.path} by ${p.process} (pid ${p.pid}, uid ${p.uid}) in ${p.where}${container}`;
}
