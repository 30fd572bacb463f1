/**
 * HivePolicy status, computed from what the cluster holds: HiveData (one per trap ×
 * container whose file was found) and the trap-error reports the nodes publish. Pure, so
 * `kubectl get hivepolicies` output is tested without a cluster; written by one elected
 * writer (the pods role) so that nodes never race on the status subresource.
 */
import type { HiveData } from "../../api/data.ts";
import { trapId as computeTrapId } from "../../api/ids.ts";
import { type Condition, LABEL_TRAP_ID } from "../../api/meta.ts";
import type { HivePolicy, HivePolicyStatus, TrapError, TrapStatus } from "../../api/policy.ts";
import { compareCodeUnits } from "../order.ts";
import { displaySafe } from "../text.ts";
import { isLayerData, isMissing } from "./hive-data.ts";
import { compileMatch } from "./match.ts";
import { type NodeTrapError, TRAP_ERROR_MESSAGE_MAX } from "./ports.ts";

const MAX_ERRORS = 32;

export function computePolicyStatus(
  policy: HivePolicy,
  dataByTrap: ReadonlyMap<string, readonly HiveData[]>,
  errorsByTrap: ReadonlyMap<string, readonly NodeTrapError[]>,
  now: Date = new Date(),
): HivePolicyStatus {
  const ref = { namespace: policy.metadata.namespace ?? "default", name: policy.metadata.name ?? "" };
  const traps: TrapStatus[] = [];
  let matched = 0;
  let failing = 0;
  let pending = 0;
  for (const trap of policy.spec.traps) {
    const id = computeTrapId(ref, trap);
    const all = dataByTrap.get(id) ?? [];
    const found = all.filter((d) => !isMissing(d) && !isLayerData(d));
    const reported = [...(errorsByTrap.get(id) ?? [])];
    const compiled = compileMatch(trap);
    // Invalid regex is decided by the spec alone: computed here, whatever the nodes said.
    const errors: TrapError[] = compiled.ok ? [] : [{ reason: compiled.reason, message: compiled.message }];
    const containers = new Set(
      found.map((d) => `${d.metadata.annotations?.pod_name}/${d.metadata.annotations?.container_name}`),
    );
    for (const e of reported.sort((a, b) =>
      compareCodeUnits(`${a.node}${a.pod}${a.container}`, `${b.node}${b.pod}${b.container}`),
    )) {
      if (e.reason === "InvalidRegex") continue;
      if (e.pod !== undefined) containers.add(`${e.pod}/${e.container}`);
      const { node, pod, container, reason, message } = e;
      errors.push({
        ...(node ? { node } : {}),
        ...(pod ? { pod } : {}),
        ...(container ? { container } : {}),
        reason,
        // Reports come from every node and name container files: shown escaped and bounded, whatever the node did.
        message: displaySafe(message, TRAP_ERROR_MESSAGE_MAX),
      });
    }
    const status: TrapStatus = {
      trapId: id,
      path: trap.path,
      matchedContainers: containers.size,
      inodesFound: found.length,
    };
    if (errors.length > 0) status.errors = errors.slice(0, MAX_ERRORS);
    const onlyWaiting = errors.every((e) => e.reason === "ContainerNotReady");
    if (errors.length > 0 && onlyWaiting) pending += 1;
    else if (errors.length > 0) failing += 1;
    matched += containers.size;
    traps.push(status);
  }
  const generation = policy.metadata.generation;
  const previous = policy.status?.conditions?.find((c) => c.type === "Ready");
  const [state, reason, message]: [Condition["status"], string, string] =
    failing > 0
      ? ["False", "TrapErrors", `${failing} of ${traps.length} traps have errors; see status.traps[].errors`]
      : pending > 0
        ? ["False", "ContainersNotReady", `${pending} traps wait for containers to run`]
        : matched === 0
          ? ["True", "NoMatchingContainers", "the policy is valid; no running container matches it yet"]
          : ["True", "TrapsWatched", `${matched} containers matched; every trapped file is watched`];
  const ready: Condition = {
    type: "Ready",
    status: state,
    reason,
    message,
    lastTransitionTime:
      previous && previous.status === state ? previous.lastTransitionTime : now.toISOString(),
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
  };
  return {
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
    trapCount: traps.length,
    matchedContainers: matched,
    conditions: [ready],
    traps,
  };
}

/** Equal apart from timestamps: no write needed. */
export function sameStatus(a: HivePolicyStatus | undefined, b: HivePolicyStatus): boolean {
  const strip = (s: HivePolicyStatus | undefined) =>
    JSON.stringify({ ...s, conditions: s?.conditions?.map(({ lastTransitionTime: _t, ...rest }) => rest) });
  return strip(a) === strip(b);
}

export function groupByTrap<T>(
  items: Iterable<T>,
  trapOf: (item: T) => string | undefined,
): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const item of items) {
    const id = trapOf(item);
    if (!id) continue;
    const list = out.get(id);
    if (list) list.push(item);
    else out.set(id, [item]);
  }
  return out;
}

export const trapOfData = (d: HiveData): string | undefined => d.metadata.labels?.[LABEL_TRAP_ID];

/** Status of a policy whose spec cannot be used (see ports.ts specProblems). */
export function invalidPolicyStatus(
  policy: HivePolicy,
  problems: string,
  now: Date = new Date(),
): HivePolicyStatus {
  const generation = policy.metadata.generation;
  const previous = policy.status?.conditions?.find((c) => c.type === "Ready");
  return {
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
    conditions: [
      {
        type: "Ready",
        status: "False",
        reason: "PolicyInvalid",
        message: displaySafe(problems, 4000),
        lastTransitionTime: previous?.status === "False" ? previous.lastTransitionTime : now.toISOString(),
        ...(generation !== undefined ? { observedGeneration: generation } : {}),
      },
    ],
  };
}
