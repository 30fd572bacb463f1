/**
 * A Kubernetes Event on the accessed pod for each alert, so `kubectl describe pod` shows
 * "file /etc/shadow read by cat (pid 4242)".
 *
 * Aggregated and rate-limited so a hot file cannot flood the API server: alerts are
 * grouped by (pod, trap); the first of a group creates an Event (count 1 or more), later
 * ones only raise its `count`, `lastTimestamp` and message, written at most once per
 * `flushIntervalMs` per group by a JSON patch. All writes share a token bucket
 * (`writesPerSecond`, `burst`); a group that finds no token stays dirty and is written,
 * with the accumulated count, on a later flush. Nothing here ever blocks or fails an alert.
 */
import { createHash } from "node:crypto";
import type { CoreV1Api, CoreV1Event } from "@kubernetes/client-node";
import type { Alert } from "../../api/alert.ts";
import { LABEL_TRAP_ID } from "../../api/meta.ts";
import { type AccessNote, ANNOTATION_ACCESS } from "../../api/report.ts";
import type { Logger } from "../log.ts";
import type { HiveMetrics } from "../metrics/metrics.ts";
import { displaySafe } from "../text.ts";

export const EVENT_REASON = "FileAccessed";
export const EVENT_COMPONENT = "hive-agent";
export const REPORTING_CONTROLLER = "hive-operator.com/agent";

export interface PodEventRecorderOptions {
  core: CoreV1Api;
  nodeName: string;
  logger: Logger;
  metrics?: HiveMetrics;
  /** How often dirty groups are written; default 10 s. The first alert of a group is written on the next tick. */
  flushIntervalMs?: number;
  /** API writes per second for all groups together; default 5. */
  writesPerSecond?: number;
  burst?: number;
  /** Groups remembered (oldest clean ones forgotten first); default 1024. */
  maxGroups?: number;
}

export interface PodEventRecorder {
  /** `podUid` makes the Event show in `kubectl describe pod` (it filters on the pod's UID). */
  record(alert: Alert, podUid?: string): void;
  /** Writes what is pending (subject to the rate limit) and waits for it. */
  flush(): Promise<void>;
  close(): Promise<void>;
}

interface Group {
  namespace: string;
  pod: string;
  podUid: string | undefined;
  name: string;
  created: boolean;
  /** Count the API object holds. */
  written: number;
  /** Alerts not yet written. */
  unwritten: number;
  first: Date;
  /** The group's latest alert; `last` and `message` are derived from it when the group is written. */
  latest: Alert;
  last: Date;
  message: string;
  lastWriteMs: number;
}

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

const alertTime = (alert: Alert): Date => new Date(Date.parse(alert.timestamp) || Date.now());

export function createPodEventRecorder(options: PodEventRecorderOptions): PodEventRecorder {
  const { core, nodeName, logger, metrics } = options;
  const flushIntervalMs = options.flushIntervalMs ?? 10_000;
  const rate = options.writesPerSecond ?? 5;
  const burst = options.burst ?? 10;
  const maxGroups = options.maxGroups ?? 1024;
  const groups = new Map<string, Group>();
  // Names are unique per agent start so a restarted agent never collides with an old Event.
  const instance = createHash("sha256")
    .update(`${nodeName}\0${Date.now()}\0${Math.random()}`)
    .digest("hex")
    .slice(0, 6);
  let tokens = burst;
  let tokensAt = performance.now();
  let running: Promise<void> | undefined;
  let closed = false;

  const takeToken = (): boolean => {
    const now = performance.now();
    tokens = Math.min(burst, tokens + ((now - tokensAt) / 1000) * rate);
    tokensAt = now;
    if (tokens < 1) return false;
    tokens -= 1;
    return true;
  };

  const create = async (g: Group, count: number): Promise<boolean> => {
    const body: CoreV1Event = {
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
    try {
      await core.createNamespacedEvent({ namespace: g.namespace, body });
      metrics?.kubernetesEvents.inc({ result: "created" });
      return true;
    } catch (error) {
      if ((error as { code?: number }).code === 409) return false; // exists: patch it instead
      throw error;
    }
  };

  const patch = async (g: Group, count: number): Promise<boolean> => {
    const body = [
      { op: "replace", path: "/count", value: count },
      { op: "replace", path: "/lastTimestamp", value: g.last.toISOString() },
      { op: "replace", path: "/message", value: g.message },
      { op: "add", path: "/metadata/annotations", value: accessNote(g.latest) },
    ];
    try {
      await core.patchNamespacedEvent({ name: g.name, namespace: g.namespace, body });
      metrics?.kubernetesEvents.inc({ result: "patched" });
      return true;
    } catch (error) {
      if ((error as { code?: number }).code === 404) return false; // expired (Events have a TTL): create again
      throw error;
    }
  };

  const write = async (g: Group): Promise<void> => {
    // Derived here, once per write, not for every alert of a hot file.
    g.last = alertTime(g.latest);
    g.message = eventMessage(g.latest);
    const count = g.written + g.unwritten;
    const taken = g.unwritten;
    g.unwritten = 0;
    g.lastWriteMs = performance.now();
    try {
      if (!g.created) {
        if (!(await create(g, count)) && !(await patch(g, count)))
          throw new Error("event neither creatable nor patchable");
        g.created = true;
      } else if (!(await patch(g, count))) {
        g.first = g.last;
        if (!(await create(g, taken))) throw new Error("expired event could not be created again");
        g.written = taken;
        return;
      }
      g.written = count;
    } catch (error) {
      g.unwritten += taken;
      metrics?.kubernetesEvents.inc({ result: "failed" });
      logger.warn("cannot write a Kubernetes Event for an alert", {
        event: `${g.namespace}/${g.name}`,
        status: (error as { code?: number }).code,
        message: (error as Error).message,
      });
    }
  };

  const runFlush = async (force: boolean): Promise<void> => {
    const now = performance.now();
    const due: Group[] = [];
    for (const g of groups.values()) {
      if (g.unwritten === 0) continue;
      // A new group is written at once; an existing one at most once per interval.
      if (!force && g.created && now - g.lastWriteMs < flushIntervalMs) continue;
      if (!takeToken()) {
        metrics?.kubernetesEvents.inc({ result: "throttled" });
        break;
      }
      due.push(g);
    }
    for (const g of due) await write(g);
  };

  const kick = (force = false): Promise<void> => {
    if (running) return running;
    running = runFlush(force).finally(() => {
      running = undefined;
    });
    return running;
  };

  const timer = setInterval(() => void kick(), Math.min(flushIntervalMs, 1000));
  timer.unref();

  return {
    record(alert, podUid) {
      if (closed || !alert.pod) return;
      // The UID is part of the key: a pod deleted and re-created under its name is another object.
      const key = `${alert.pod.namespace}/${alert.pod.name}/${podUid ?? ""}/${alert.trap_id}`;
      let g = groups.get(key);
      if (!g) {
        if (groups.size >= maxGroups) {
          for (const [k, old] of groups) {
            if (old.unwritten === 0) {
              groups.delete(k);
              break;
            }
          }
        }
        const suffix = createHash("sha256")
          .update(`${alert.trap_id}\0${instance}`)
          .digest("hex")
          .slice(0, 10);
        const at = alertTime(alert);
        g = {
          namespace: alert.pod.namespace,
          pod: alert.pod.name,
          podUid,
          // Event names follow kubectl's <object>.<suffix> convention; 253 characters at most.
          name: `${alert.pod.name.slice(0, 200)}.hive-${suffix}`,
          created: false,
          written: 0,
          unwritten: 0,
          first: at,
          latest: alert,
          last: at,
          message: "",
          lastWriteMs: 0,
        };
        groups.set(key, g);
      }
      g.unwritten += 1;
      g.latest = alert;
      if (!g.created) void kick();
    },
    flush: async () => {
      if (running) await running;
      await kick(true);
    },
    async close() {
      closed = true;
      clearInterval(timer);
      if (running) await running;
      await kick(true);
    },
  };
}
