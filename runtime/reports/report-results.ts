/**
 * What Hive's PolicyReports say, as pure functions over what the pods role already holds: one
 * result per (HivePolicy, trap, pod), in the report of the pod's namespace whichever namespace
 * the policy lives in.
 * - fail: the trapped file was accessed by a process the trap does not allow, within the window
 *   (access-folds.ts keeps those accesses);
 * - error: the trap cannot be armed on one of the pod's containers (the nodes' trap errors);
 * - skip: the pod runs on a node without a ready Hive agent (coverage.ts);
 * - pass: the trap is armed on the pod's containers and nothing unexpected touched the file.
 * Memory and work grow with pods × traps, never with the number of accesses.
 */
import type { V1Pod } from "@kubernetes/client-node";
import type { HiveData } from "../../api/data.ts";
import { trapId as computeTrapId } from "../../api/ids.ts";
import { LABEL_POLICY, LABEL_POLICY_NAMESPACE, LABEL_TRAP_ID } from "../../api/meta.ts";
import { DEFAULT_SEVERITY, type HivePolicy, type HiveTrap } from "../../api/policy.ts";
import { REPORT_SEVERITY, REPORT_SOURCE, type ReportResult, type ResultKind } from "../../api/report.ts";
import { uncoveredPodsOf } from "../controllers/coverage.ts";
import { isLayerData, isMissing } from "../controllers/hive-data.ts";
import type { NodeTrapError } from "../controllers/ports.ts";
import { compareCodeUnits } from "../order.ts";
import { displaySafe } from "../text.ts";

/** The unexpected accesses of one pod to one trap's file, folded from the agents' access Events. */
export interface FailRecord {
  /** The HivePolicy as namespace/name. */
  policy: string;
  trapId: string;
  namespace: string;
  pod: string;
  podUid?: string;
  container?: string;
  count: number;
  /** Milliseconds since the epoch of the latest access. */
  lastAccess: number;
  accesses: string;
  exe: string;
  parentExe: string;
  alertId: string;
  /** Access Event name → the count already folded from it (so a re-read Event is not counted twice). */
  events: Record<string, number>;
}

export interface ReportInputs {
  /** Live HivePolicies whose spec is valid. */
  policies: Iterable<HivePolicy>;
  data: Iterable<HiveData>;
  trapErrors: Iterable<NodeTrapError>;
  /** Pods on nodes without a ready agent; undefined while not yet known (no skip results then). */
  uncovered: readonly V1Pod[] | undefined;
  platformNamespace: string;
  fails: Iterable<FailRecord>;
  now: number;
  failWindowMs: number;
}

export const resultKey = (policy: string, trapId: string, namespace: string, pod: string): string =>
  `${policy}\n${trapId}\n${namespace}\n${pod}`;

interface Pending {
  policy: string;
  trap: HiveTrap;
  trapId: string;
  namespace: string;
  pod: string;
  podUid?: string | undefined;
  result: ResultKind;
  message: string;
  containers: Set<string>;
  fail?: FailRecord;
}

/** Results that outrank: a recent fail over an error over a skip over a pass. */
const RANK: Record<ResultKind, number> = { fail: 0, error: 1, warn: 2, skip: 3, pass: 4 };

/** The results of every namespace with selected pods (or recent fails), by namespace. */
export function reportResults(inputs: ReportInputs): Map<string, ReportResult[]> {
  const traps = trapsById(inputs.policies);
  const pending = new Map<string, Pending>();
  const put = (p: Omit<Pending, "containers">, container?: string): void => {
    const key = resultKey(p.policy, p.trapId, p.namespace, p.pod);
    const current = pending.get(key);
    if (!current || RANK[p.result] < RANK[current.result]) {
      pending.set(key, {
        ...p,
        podUid: p.podUid ?? current?.podUid,
        containers: current?.containers ?? new Set(),
      });
    }
    if (container) pending.get(key)?.containers.add(container);
  };
  addArmed(inputs.data, traps, put);
  addErrors(inputs.trapErrors, traps, put);
  addSkipped(inputs, traps, put);
  for (const fail of inputs.fails) {
    const found = traps.get(fail.trapId);
    if (!found || found.policy !== fail.policy) continue; // the policy or trap is gone: so is its result
    if (inputs.now - fail.lastAccess > inputs.failWindowMs) continue;
    put({
      ...found,
      namespace: fail.namespace,
      pod: fail.pod,
      podUid: fail.podUid,
      result: "fail",
      message: "",
      fail,
    });
  }
  const out = new Map<string, ReportResult[]>();
  for (const p of pending.values()) {
    const list = out.get(p.namespace) ?? [];
    list.push(toResult(p));
    out.set(p.namespace, list);
  }
  for (const list of out.values()) list.sort(byRankThenName);
  return out;
}

function trapsById(
  policies: Iterable<HivePolicy>,
): Map<string, { policy: string; trap: HiveTrap; trapId: string }> {
  const out = new Map<string, { policy: string; trap: HiveTrap; trapId: string }>();
  for (const policy of policies) {
    const ref = { namespace: policy.metadata.namespace ?? "default", name: policy.metadata.name ?? "" };
    for (const trap of policy.spec.traps) {
      const id = computeTrapId(ref, trap);
      out.set(id, { policy: `${ref.namespace}/${ref.name}`, trap, trapId: id });
    }
  }
  return out;
}

type Put = (p: Omit<Pending, "containers">, container?: string) => void;
type Traps = ReadonlyMap<string, { policy: string; trap: HiveTrap; trapId: string }>;

function addArmed(data: Iterable<HiveData>, traps: Traps, put: Put): void {
  for (const d of data) {
    // An image layer's file belongs to no pod yet; a missing file is not armed (its error says why).
    if (isLayerData(d) || isMissing(d)) continue;
    const labels = d.metadata.labels ?? {};
    const notes = d.metadata.annotations ?? {};
    const found = traps.get(labels[LABEL_TRAP_ID] ?? "");
    if (!found || found.policy !== `${labels[LABEL_POLICY_NAMESPACE]}/${labels[LABEL_POLICY]}`) continue;
    if (!notes.namespace || !notes.pod_name) continue;
    put(
      {
        ...found,
        namespace: notes.namespace,
        pod: notes.pod_name,
        podUid: notes.pod_uid || undefined,
        result: "pass",
        message: "",
      },
      notes.container_name,
    );
  }
}

function addErrors(errors: Iterable<NodeTrapError>, traps: Traps, put: Put): void {
  for (const e of errors) {
    const found = traps.get(e.trapId);
    if (!found || found.policy !== `${e.policyNamespace}/${e.policyName}` || !e.pod) continue;
    // Waiting for a container to start is not an error of the trap.
    if (e.reason === "ContainerNotReady") continue;
    const namespace = e.podNamespace ?? e.policyNamespace;
    const where = e.container ? `container ${e.container}: ` : "";
    put({ ...found, namespace, pod: e.pod, result: "error", message: `${e.reason}: ${where}${e.message}` });
  }
}

function addSkipped(inputs: ReportInputs, traps: Traps, put: Put): void {
  if (!inputs.uncovered || inputs.uncovered.length === 0) return;
  for (const policy of inputs.policies) {
    const ref = { namespace: policy.metadata.namespace ?? "default", name: policy.metadata.name ?? "" };
    for (const trap of policy.spec.traps) {
      const found = traps.get(computeTrapId(ref, trap));
      if (!found) continue;
      const one = { ...policy, spec: { ...policy.spec, traps: [trap] } };
      for (const p of uncoveredPodsOf(one, inputs.platformNamespace, inputs.uncovered)) {
        put({
          ...found,
          namespace: p.namespace,
          pod: p.name,
          result: "skip",
          message: `no ready Hive agent on node ${p.node}: the file is not watched there`,
        });
      }
    }
  }
}

function toResult(p: Pending): ReportResult {
  const severity = REPORT_SEVERITY[p.trap.severity ?? DEFAULT_SEVERITY];
  const result: ReportResult = {
    policy: p.policy,
    rule: p.trap.path,
    result: p.result,
    severity,
    source: REPORT_SOURCE,
    category: "File access",
    scored: true,
    message:
      p.result === "pass" ? passMessage(p) : p.result === "fail" && p.fail ? failMessage(p.fail) : p.message,
    resources: [
      {
        apiVersion: "v1",
        kind: "Pod",
        namespace: p.namespace,
        name: p.pod,
        ...(p.podUid ? { uid: p.podUid } : {}),
      },
    ],
    properties: { trapId: p.trapId },
  };
  if (p.fail) {
    result.timestamp = { seconds: Math.floor(p.fail.lastAccess / 1000), nanos: 0 };
    result.properties = failProperties(p.fail);
  }
  return result;
}

const passMessage = (p: Pending): string =>
  `armed on ${p.containers.size} container${p.containers.size === 1 ? "" : "s"} (${[...p.containers].sort().join(", ")}); nothing unexpected accessed it`;

/** "read by /usr/bin/cat (parent /bin/sh), 3 times, last 2026-…; alert …": the container chose the names. */
export function failMessage(f: FailRecord): string {
  const exe = displaySafe(f.exe || "an unknown executable", 256);
  const parent = f.parentExe ? ` (parent ${displaySafe(f.parentExe, 256)})` : "";
  const times = f.count === 1 ? "once" : `${f.count} times`;
  return `${f.accesses || "accessed"} by ${exe}${parent}, ${times}, last ${new Date(f.lastAccess).toISOString()}; alert ${f.alertId}`;
}

/** A fail's properties: what a reader wants beside the message, and what the next writer goes on from. */
export function failProperties(f: FailRecord): Record<string, string> {
  return {
    trapId: f.trapId,
    count: String(f.count),
    lastAccess: new Date(f.lastAccess).toISOString(),
    accesses: f.accesses,
    exe: displaySafe(f.exe, 256),
    parentExe: displaySafe(f.parentExe, 256),
    alertId: f.alertId,
    ...(f.container ? { container: f.container } : {}),
    events: JSON.stringify(f.events),
  };
}

function byRankThenName(a: ReportResult, b: ReportResult): number {
  const rank = RANK[a.result ?? "pass"] - RANK[b.result ?? "pass"];
  if (rank !== 0) return rank;
  const key = (r: ReportResult) => `${r.policy}\n${r.rule}\n${r.resources?.[0]?.name}`;
  return compareCodeUnits(key(a), key(b));
}
