/**
 * Which containers a trap applies to: every `match` filter of the reference design must
 * hold (pod name, namespace, IPv4, container-name regex, matchLabels); no filter matches
 * every pod. Pure functions over Pod objects, so the rules are tested without an API server.
 */
import type { V1Pod } from "@kubernetes/client-node";
import { containerNameMatcher } from "../../api/container-name.ts";
import type { HiveTrap } from "../../api/policy.ts";

export interface CompiledMatch {
  trap: HiveTrap;
  /** Whole-name match in linear time (RE2); undefined when the trap has no container-name filter. */
  containerName?: (name: string) => boolean;
}

export type CompileResult =
  | { ok: true; match: CompiledMatch }
  | { ok: false; reason: "InvalidRegex"; message: string };

/**
 * Compiles a trap's container-name regex once; one RE2 cannot run (a backreference, a
 * lookaround) or too large is a trap error, never a crash, and the trap matches nothing.
 */
export function compileMatch(trap: HiveTrap): CompileResult {
  const pattern = trap.match?.["container-name"];
  if (pattern === undefined) return { ok: true, match: { trap } };
  const compiled = containerNameMatcher(pattern);
  if (compiled.ok) return { ok: true, match: { trap, containerName: compiled.matches } };
  return {
    ok: false,
    reason: "InvalidRegex",
    message: `container-name ${JSON.stringify(pattern)}: ${compiled.message}`,
  };
}

export interface MatchedContainer {
  name: string;
  /** `containerd://<id>` from the pod status; absent until the runtime created the container. */
  containerId?: string;
  /** The container runs, so its root can be reached. */
  running: boolean;
}

/** A pod whose containers are gone for good: its HiveData must go too (failures count as terminations). */
export function isPodFinished(pod: V1Pod): boolean {
  const phase = pod.status?.phase;
  return phase === "Succeeded" || phase === "Failed";
}

function podIps(pod: V1Pod): string[] {
  const ips = (pod.status?.podIPs ?? []).map((p) => p.ip);
  if (pod.status?.podIP) ips.push(pod.status.podIP);
  return ips;
}

/**
 * Tenancy: a HivePolicy in the platform namespace (the monitor's, where the agent runs) may
 * reach pods of every namespace; any other policy only the pods of its own namespace, whatever
 * its `match.namespace` says. Admission rejects such a tenant policy too (component/builders/
 * admission.ts); this check is the agent's own, so a policy admitted before is still held to it.
 */
export function policyReachesPod(
  policyNamespace: string | undefined,
  platformNamespace: string,
  pod: V1Pod,
): boolean {
  const namespace = policyNamespace ?? "default";
  return namespace === platformNamespace || pod.metadata?.namespace === namespace;
}

/** Pod-level filters (everything but container-name). */
export function podMatches(match: HiveTrap["match"], pod: V1Pod): boolean {
  if (!match) return true;
  const meta = pod.metadata ?? {};
  if (match.pod !== undefined && meta.name !== match.pod) return false;
  if (match.namespace !== undefined && meta.namespace !== match.namespace) return false;
  if (match.ip !== undefined && !podIps(pod).includes(match.ip)) return false;
  for (const [key, value] of Object.entries(match.matchLabels ?? {})) {
    if (meta.labels?.[key] !== value) return false;
  }
  return true;
}

/** The containers of `pod` the trap applies to, with their runtime ids and whether they run. */
export function matchContainers(compiled: CompiledMatch, pod: V1Pod): MatchedContainer[] {
  if (isPodFinished(pod) || pod.metadata?.deletionTimestamp) return [];
  if (!podMatches(compiled.trap.match, pod)) return [];
  const statuses = new Map((pod.status?.containerStatuses ?? []).map((s) => [s.name, s]));
  const out: MatchedContainer[] = [];
  for (const container of pod.spec?.containers ?? []) {
    if (compiled.containerName && !compiled.containerName(container.name)) continue;
    const status = statuses.get(container.name);
    const matched: MatchedContainer = {
      name: container.name,
      running: Boolean(status?.state?.running && status.containerID),
    };
    if (status?.containerID) matched.containerId = status.containerID;
    out.push(matched);
  }
  return out;
}

/**
 * Whether the trap applies to the container named `name` of `pod`, init containers included (an
 * access attributed by cgroup, before the pod's status names the container).
 */
export function selectsContainer(compiled: CompiledMatch, pod: V1Pod, name: string): boolean {
  if (isPodFinished(pod) || !podMatches(compiled.trap.match, pod)) return false;
  if (compiled.containerName && !compiled.containerName(name)) return false;
  return [...(pod.spec?.containers ?? []), ...(pod.spec?.initContainers ?? [])].some((c) => c.name === name);
}
