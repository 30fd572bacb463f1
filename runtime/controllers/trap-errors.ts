/**
 * The trap errors a discover pass found on this node, and which of them to report: a
 * container about to start is not worth an Event, so waiting is reported only once it lasts.
 */
import type { HivePolicy } from "../../api/policy.ts";
import type { NodeTrapError } from "./ports.ts";

/** A trap error of this node, before it is told which policy and trap it belongs to. */
export type TrapErrorOf = Omit<NodeTrapError, "node" | "policyNamespace" | "policyName" | "trapId">;

/** Collects a pass's trap errors, each naming this node and its policy and trap. */
export class TrapErrors {
  readonly list: NodeTrapError[] = [];
  private readonly nodeName: string;

  constructor(nodeName: string) {
    this.nodeName = nodeName;
  }

  add(policy: HivePolicy, trapId: string, error: TrapErrorOf): void {
    const report: NodeTrapError = {
      ...error,
      node: this.nodeName,
      policyNamespace: policy.metadata.namespace ?? "default",
      policyName: policy.metadata.name ?? "",
      trapId,
    };
    if (policy.metadata.uid) report.policyUid = policy.metadata.uid;
    this.list.push(report);
  }
}

/**
 * Of `errors`, those to report now: every error except a container waiting for less than
 * `reportAfterMs`. `waitingSince` (trap/pod/container → first seen) persists between passes;
 * `recheckIn` is told when a waiting one becomes due.
 */
export function dueReports(
  errors: readonly NodeTrapError[],
  waitingSince: Map<string, number>,
  reportAfterMs: number,
  recheckIn: (ms: number) => void,
  now = Date.now(),
): NodeTrapError[] {
  const seen = new Set<string>();
  const due = errors.filter((e) => {
    if (e.reason !== "ContainerNotReady") return true;
    const k = `${e.trapId}/${e.pod}/${e.container}`;
    seen.add(k);
    const since = waitingSince.get(k) ?? now;
    waitingSince.set(k, since);
    if (now - since >= reportAfterMs) return true;
    recheckIn(reportAfterMs - (now - since));
    return false;
  });
  for (const k of [...waitingSince.keys()]) if (!seen.has(k)) waitingSince.delete(k);
  return due;
}
