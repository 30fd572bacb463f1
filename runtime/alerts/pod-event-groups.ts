/**
 * Alerts grouped by (pod, trap), one Kubernetes Event each: what each group's Event holds,
 * what is not written yet, and which groups are due for a write. No API calls here
 * (pod-event-writer.ts makes them).
 */
import { createHash } from "node:crypto";
import type { Alert } from "../../api/alert.ts";
import { alertTime, eventMessage } from "./pod-event-content.ts";

export interface Group {
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

type AlertPod = NonNullable<Alert["pod"]>;

/** A short id of this agent start: Event names made with it never collide with an earlier start's. */
export function instanceId(nodeName: string): string {
  return createHash("sha256")
    .update(`${nodeName}\0${Date.now()}\0${Math.random()}`)
    .digest("hex")
    .slice(0, 6);
}

/** The UID is part of the key: a pod deleted and re-created under its name is another object. */
export const groupKey = (pod: AlertPod, podUid: string | undefined, trapId: string): string =>
  `${pod.namespace}/${pod.name}/${podUid ?? ""}/${trapId}`;

/** A group for `alert`'s pod and trap, with nothing in it yet. */
export function newGroup(alert: Alert, pod: AlertPod, podUid: string | undefined, instance: string): Group {
  const suffix = createHash("sha256").update(`${alert.trap_id}\0${instance}`).digest("hex").slice(0, 10);
  const at = alertTime(alert);
  return {
    namespace: pod.namespace,
    pod: pod.name,
    podUid,
    // Event names follow kubectl's <object>.<suffix> convention; 253 characters at most.
    name: `${pod.name.slice(0, 200)}.hive-${suffix}`,
    created: false,
    written: 0,
    unwritten: 0,
    first: at,
    latest: alert,
    last: at,
    message: "",
    lastWriteMs: 0,
  };
}

/**
 * Takes the group's unwritten alerts for a write at `nowMs`: `count` is what the Event will
 * hold, `taken` how many this write adds (given back if it fails).
 */
export function startWrite(g: Group, nowMs: number): { count: number; taken: number } {
  // Derived here, once per write, not for every alert of a hot file.
  g.last = alertTime(g.latest);
  g.message = eventMessage(g.latest);
  const count = g.written + g.unwritten;
  const taken = g.unwritten;
  g.unwritten = 0;
  g.lastWriteMs = nowMs;
  return { count, taken };
}

export class EventGroups {
  private readonly groups = new Map<string, Group>();
  private readonly maxGroups: number;
  private readonly instance: string;

  constructor(maxGroups: number, instance: string) {
    this.maxGroups = maxGroups;
    this.instance = instance;
  }

  /** Adds the alert to its group (a new one when needed); returns the group. */
  add(alert: Alert, pod: AlertPod, podUid: string | undefined): Group {
    const key = groupKey(pod, podUid, alert.trap_id);
    let g = this.groups.get(key);
    if (!g) {
      if (this.groups.size >= this.maxGroups) this.forgetOldestClean();
      g = newGroup(alert, pod, podUid, this.instance);
      this.groups.set(key, g);
    }
    g.unwritten += 1;
    g.latest = alert;
    return g;
  }

  /**
   * The groups to write at `nowMs`, each with a token taken: a new group at once, an existing
   * one at most once per `intervalMs` (any when `force`). `throttled`: a due group found no token.
   */
  due(
    nowMs: number,
    force: boolean,
    intervalMs: number,
    takeToken: () => boolean,
  ): { due: Group[]; throttled: boolean } {
    const due: Group[] = [];
    for (const g of this.groups.values()) {
      if (g.unwritten === 0) continue;
      if (!force && g.created && nowMs - g.lastWriteMs < intervalMs) continue;
      if (!takeToken()) return { due, throttled: true };
      due.push(g);
    }
    return { due, throttled: false };
  }

  /** Forgets the oldest group with nothing left to write, if any (a dirty one is kept). */
  private forgetOldestClean(): void {
    for (const [k, old] of this.groups) {
      if (old.unwritten === 0) {
        this.groups.delete(k);
        return;
      }
    }
  }
}
