/**
 * What the controllers need from the Kubernetes API, as narrow interfaces. The real
 * implementations (kube-ports.ts) use the agent's Kubernetes client (k8s/kube-apis.ts); the
 * controllers never see HTTP, so their logic is the same against a cluster and against fakes.
 */
import type { HiveData } from "../../api/data.ts";
import { HiveError } from "../../api/errors.ts";
import type { HivePolicy, HivePolicyStatus, TrapError } from "../../api/policy.ts";

export interface DataWriter {
  /** Creates the object, or replaces one written earlier (a restart); resolves with the stored object. */
  create(data: HiveData): Promise<HiveData>;
  /** Replaces the object (optimistic concurrency on metadata.resourceVersion). */
  replace(data: HiveData): Promise<HiveData>;
  /** Deletes; an object that is already gone is not an error. */
  remove(namespace: string, name: string): Promise<void>;
  /** Merges annotations (used by a loader to ask a node to re-resolve). */
  annotate(namespace: string, name: string, annotations: Record<string, string>): Promise<void>;
}

/** Longest message of one trap error (it may quote a container's paths and symlink targets). */
export const TRAP_ERROR_MESSAGE_MAX = 1024;

/** One problem a node found with one trap, as it reports it for the policy status. */
export interface NodeTrapError extends TrapError {
  /** The pod's namespace, when the error is a pod's (its PolicyReport is that namespace's). */
  podNamespace?: string;
  policyNamespace: string;
  policyName: string;
  policyUid?: string;
  trapId: string;
}

export interface TrapErrorReporter {
  /** Makes the set of error reports of THIS node equal to `errors` (creates, updates, deletes). */
  sync(errors: readonly NodeTrapError[]): Promise<void>;
}

export interface PolicyWriter {
  /** Writes the status subresource; a conflict rejects (the caller recomputes on the next event). */
  writeStatus(policy: HivePolicy, status: HivePolicyStatus): Promise<void>;
  /** Replaces metadata.finalizers (optimistic concurrency on resourceVersion). */
  setFinalizers(policy: HivePolicy, finalizers: string[]): Promise<void>;
}

export type WatchEventType = "ADDED" | "MODIFIED" | "DELETED";

export { objectKey } from "../k8s/object-key.ts";

/**
 * The shape the controllers rely on (a list of traps, each with an absolute path and an
 * optional match object). A policy without it (a stale CRD, a hand-edited object) is
 * ignored by discover and the loader instead of failing every pass, and the status writer
 * reports it. Finer problems (an invalid regex, a bad mode) are per-trap errors instead.
 */
export function specProblems(policy: HivePolicy): string | undefined {
  const traps = (policy.spec as { traps?: unknown } | undefined)?.traps;
  if (!Array.isArray(traps) || traps.length === 0) return "spec.traps: must list at least one trap";
  const problems: string[] = [];
  traps.forEach((trap: unknown, i) => {
    const t = trap as { path?: unknown; match?: unknown } | null;
    if (t === null || typeof t !== "object") problems.push(`spec.traps[${i}]: must be an object`);
    else if (typeof t.path !== "string" || !t.path.startsWith("/"))
      problems.push(`spec.traps[${i}].path: must be an absolute path`);
    else if (t.match !== undefined && (t.match === null || typeof t.match !== "object"))
      problems.push(`spec.traps[${i}].match: must be an object`);
  });
  return problems.length > 0 ? problems.join("; ") : undefined;
}

/**
 * The API refused a write for authorization (RBAC or the node-scope admission policy, which
 * lets an agent change only the HiveData of its own node). Controllers then leave the object
 * to its own node's agent instead of retrying.
 */
export function isForbidden(error: unknown): boolean {
  return error instanceof HiveError && error.details.status === 403;
}
