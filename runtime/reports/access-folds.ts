/**
 * The unexpected accesses of each (policy, trap, pod), folded from the agents' access Events
 * (runtime/alerts/pod-events.ts: one Event per pod × trap per agent, whose `count` grows). An
 * Event is an ephemeral input (the API server expires it after an hour): what it added is kept
 * here as a FailRecord, and in the report's own `fail` result, from which the next writer starts
 * again (`seed`). Each Event's count is folded once: the record remembers how much of each
 * live Event it has counted. Memory grows with pods × traps (and their live Events), not with
 * the number of accesses.
 */
import type { CoreV1Event } from "@kubernetes/client-node";
import { LABEL_TRAP_ID } from "../../api/meta.ts";
import { type AccessNote, ANNOTATION_ACCESS, type PolicyReport } from "../../api/report.ts";
import type { WatchEventType } from "../controllers/ports.ts";
import { type FailRecord, resultKey } from "./report-results.ts";

const MAX_NOTE_FIELD = 1024;

/** The access note of a Hive access Event; undefined when it has none or it is malformed. */
export function accessNoteOf(event: CoreV1Event): AccessNote | undefined {
  const text = event.metadata?.annotations?.[ANNOTATION_ACCESS];
  if (!text || text.length > 8 * MAX_NOTE_FIELD) return undefined;
  try {
    const raw = JSON.parse(text) as Record<string, unknown>;
    const field = (k: keyof AccessNote) =>
      typeof raw[k] === "string" ? (raw[k] as string).slice(0, MAX_NOTE_FIELD) : "";
    const note: AccessNote = {
      policy: field("policy"),
      accesses: field("accesses"),
      exe: field("exe"),
      parentExe: field("parentExe"),
      alertId: field("alertId"),
      container: field("container"),
    };
    return note.policy.includes("/") ? note : undefined;
  } catch {
    return undefined;
  }
}

const eventTime = (event: CoreV1Event): number => {
  const t = event.lastTimestamp ?? event.eventTime ?? event.firstTimestamp;
  const ms = t ? new Date(t as unknown as string).getTime() : Number.NaN;
  return Number.isNaN(ms) ? Date.now() : ms;
};

export class AccessFolds {
  private readonly records = new Map<string, FailRecord>();

  values(): IterableIterator<FailRecord> {
    return this.records.values();
  }

  get size(): number {
    return this.records.size;
  }

  /** Folds what an access Event added since it was last seen. */
  onEvent(type: WatchEventType, event: CoreV1Event): void {
    const name = `${event.metadata?.namespace}/${event.metadata?.name}`;
    const trapId = event.metadata?.labels?.[LABEL_TRAP_ID];
    const note = accessNoteOf(event);
    const pod = event.involvedObject;
    if (!trapId || !note || pod?.kind !== "Pod" || !pod.name || !pod.namespace) return;
    const key = resultKey(note.policy, trapId, pod.namespace, pod.name);
    const record = this.records.get(key);
    if (type === "DELETED") {
      // Expired: what it added stays counted; a new Event of the group starts from zero.
      if (record) delete record.events[name];
      return;
    }
    const count = Math.max(1, Math.floor(event.count ?? 1));
    const next: FailRecord = record ?? {
      policy: note.policy,
      trapId,
      namespace: pod.namespace,
      pod: pod.name,
      count: 0,
      lastAccess: 0,
      accesses: "",
      exe: "",
      parentExe: "",
      alertId: "",
      events: {},
    };
    const added = count - (next.events[name] ?? 0);
    if (added <= 0) return;
    next.events[name] = count;
    next.count += added;
    if (pod.uid) next.podUid = pod.uid;
    const at = eventTime(event);
    if (at >= next.lastAccess) {
      Object.assign(next, {
        lastAccess: at,
        accesses: note.accesses,
        exe: note.exe,
        parentExe: note.parentExe,
        alertId: note.alertId,
        ...(note.container ? { container: note.container } : {}),
      });
    }
    this.records.set(key, next);
  }

  /**
   * Takes up the `fail` results a previous writer left in `report` (their count, last access and
   * the Events they had folded), for records not known yet. Called with the reports listed before
   * the first pass.
   */
  seed(report: PolicyReport): void {
    for (const r of report.results ?? []) {
      const props = r.properties ?? {};
      const pod = r.resources?.[0];
      if (r.result !== "fail" || !props.trapId || !pod?.name || !pod.namespace) continue;
      const key = resultKey(r.policy, props.trapId, pod.namespace, pod.name);
      if (this.records.has(key)) continue;
      const lastAccess = Date.parse(props.lastAccess ?? "");
      const count = Number(props.count);
      if (Number.isNaN(lastAccess) || !Number.isSafeInteger(count) || count < 1) continue;
      this.records.set(key, {
        policy: r.policy,
        trapId: props.trapId,
        namespace: pod.namespace,
        pod: pod.name,
        ...(pod.uid ? { podUid: pod.uid } : {}),
        ...(props.container ? { container: props.container } : {}),
        count,
        lastAccess,
        accesses: props.accesses ?? "",
        exe: props.exe ?? "",
        parentExe: props.parentExe ?? "",
        alertId: props.alertId ?? "",
        events: parseEvents(props.events),
      });
    }
  }

  /** Forgets records older than the window, and Event names no longer alive (`live`). */
  prune(now: number, windowMs: number, live: ReadonlySet<string>): void {
    for (const [key, r] of this.records) {
      if (now - r.lastAccess > windowMs) {
        this.records.delete(key);
        continue;
      }
      for (const name of Object.keys(r.events)) if (!live.has(name)) delete r.events[name];
    }
  }
}

function parseEvents(text: string | undefined): Record<string, number> {
  if (!text) return {};
  try {
    const raw = JSON.parse(text) as Record<string, unknown>;
    const out: Record<string, number> = {};
    for (const [k, v] of Object.entries(raw))
      if (typeof v === "number" && Number.isSafeInteger(v)) out[k] = v;
    return out;
  } catch {
    return {};
  }
}
