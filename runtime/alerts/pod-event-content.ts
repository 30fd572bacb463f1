/**
 * What a pod's Kubernetes Event for alerts says: its message, the note the PolicyReports'
 * writer reads, and the object created (or the patch raising its count) for a group of alerts
 * (pod-event-groups.ts).
 */
import type { CoreV1Event } from "@kubernetes/client-node";
import type { Alert } from "../../api/alert.ts";
import { LABEL_TRAP_ID } from "../../api/meta.ts";
import { type AccessNote, ANNOTATION_ACCESS } from "../../api/report.ts";
import { displaySafe } from "../text.ts";
import type { Group } from "./pod-event-groups.ts";

export const EVENT_REASON = "FileAccessed";
export const EVENT_COMPONENT = "hive-agent";
export const REPORTING_CONTROLLER = "hive-operator.com/agent";

/** Longest Event message written (the newer Events API bounds a note to 1 KiB: stay within it). */
export const EVENT_MESSAGE_MAX = 1024;

/**
 * "file /etc/shadow read by cat (pid 4242, /usr/bin/cat)" — accesses joined with "/". The path,
 * comm and executable are the container's to choose: each is escaped and bounded on its own (so
 * a long path cannot push the process out of the message), then the whole message once more.
 */
export function eventMessage(alert: Alert): string {
  const what = alert.metadata.accesses.length > 0 ? alert.metadata.accesses.join("/") : "accessed";
  const exe = alert.process.exe ? `, ${displaySafe(alert.process.exe, 256)}` : "";
  const container = alert.pod?.container.name ? ` in container ${alert.pod.container.name}` : "";
  const path = displaySafe(alert.metadata.path, 384);
  const comm = displaySafe(alert.process.comm, 64);
  return displaySafe(
    `file ${path} ${what} by ${comm} (pid ${alert.process.tgid}${exe})${container}`,
    EVENT_MESSAGE_MAX,
  );
}

/** What the PolicyReports' writer folds from the group's latest alert (api/report.ts ANNOTATION_ACCESS). */
export function accessNote(alert: Alert): Record<string, string> {
  const note: AccessNote = {
    policy: `${alert.hive_policy_namespace ?? "default"}/${alert.hive_policy_name}`,
    accesses: alert.metadata.accesses.join("/") || alert.metadata.change || "accessed",
    exe: alert.process.exe ?? "",
    parentExe: alert.process.parent?.exe ?? "",
    alertId: alert.id,
    container: alert.pod?.container.name ?? "",
  };
  return { [ANNOTATION_ACCESS]: JSON.stringify(note) };
}

/** When the alert happened; now when its timestamp does not parse. */
export const alertTime = (alert: Alert): Date => new Date(Date.parse(alert.timestamp) || Date.now());

/** The Event of a group holding `count` alerts, on the pod (its UID makes `kubectl describe pod` list it). */
export function groupEvent(g: Group, count: number, nodeName: string): CoreV1Event {
  return {
    metadata: {
      name: g.name,
      namespace: g.namespace,
      labels: { "app.kubernetes.io/managed-by": "hive", [LABEL_TRAP_ID]: g.latest.trap_id },
      annotations: accessNote(g.latest),
    },
    involvedObject: {
      apiVersion: "v1",
      kind: "Pod",
      name: g.pod,
      namespace: g.namespace,
      ...(g.podUid ? { uid: g.podUid } : {}),
    },
    reason: EVENT_REASON,
    message: g.message,
    type: "Warning",
    count,
    firstTimestamp: g.first,
    lastTimestamp: g.last,
    source: { component: EVENT_COMPONENT, host: nodeName },
    reportingComponent: REPORTING_CONTROLLER,
    reportingInstance: nodeName,
    action: "Access",
  };
}

/** The JSON patch raising a group's Event to `count` alerts, showing the latest. */
export function groupEventPatch(g: Group, count: number): object[] {
  return [
    { op: "replace", path: "/count", value: count },
    { op: "replace", path: "/lastTimestamp", value: g.last.toISOString() },
    { op: "replace", path: "/message", value: g.message },
    { op: "add", path: "/metadata/annotations", value: accessNote(g.latest) },
  ];
}
