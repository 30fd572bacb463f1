/**
 * Pods controller (one per cluster, elected), plus the cluster-wide duties that need a
 * single writer:
 * - a pod that terminated or failed: remove its HiveData. Deleted pods are also collected
 *   by Kubernetes through the HiveData's ownerReference to the Pod; the controller still has
 *   to act itself for pods that finished but still exist (Jobs, evicted pods), and deletes
 *   on pod deletion too so the kernel map shrinks without waiting for the garbage collector.
 * - pod creation needs no action here: the discover controller of the pod's node watches
 *   its node's pods and resolves the new containers itself.
 * - HivePolicy finalizer: added to live policies; on deletion the policy's HiveData and
 *   trap-error Events are removed, then the finalizer.
 * - HivePolicy status: aggregated from HiveData + the nodes' trap-error reports, written
 *   only on change.
 */
import type { V1Pod } from "@kubernetes/client-node";
import type { HiveData } from "../../api/data.ts";
import { LABEL_POLICY, LABEL_POLICY_NAMESPACE, POLICY_FINALIZER } from "../../api/meta.ts";
import type { HivePolicy } from "../../api/policy.ts";
import type { Logger } from "../log.ts";
import { isPodFinished } from "./match.ts";
import {
  computePolicyStatus,
  groupByTrap,
  invalidPolicyStatus,
  sameStatus,
  trapOfData,
} from "./policy-status.ts";
import {
  type DataWriter,
  isForbidden,
  type NodeTrapError,
  objectKey,
  type PolicyWriter,
  specProblems,
  type WatchEventType,
} from "./ports.ts";
import { type ControllerLifecycle, createReconcileLoop } from "./reconcile-loop.ts";

export interface PodsOptions {
  writer: DataWriter;
  policyWriter: PolicyWriter;
  /** Removes the trap-error Events of a deleted policy (they are the nodes', but nobody else will). */
  removeErrorReports?: (policy: HivePolicy) => Promise<void>;
  log: Logger;
  debounceMs?: number;
  /** How long a deleting policy waits for other nodes to remove HiveData this agent may not delete (default 60 s). */
  finalizerWaitMs?: number;
  /** Called with each reconcile pass's duration in seconds (hive_reconcile_duration_seconds). */
  observeReconcile?: (seconds: number) => void;
}

export interface PodsStats {
  dataDeletedForPods: number;
  dataDeletedForPolicies: number;
  statusWrites: number;
  finalizersAdded: number;
  finalizersRemoved: number;
}

export interface PodsController extends ControllerLifecycle<PodsStats> {
  onPod(type: WatchEventType, pod: V1Pod): void;
  onData(type: WatchEventType, data: HiveData): void;
  onPolicy(type: WatchEventType, policy: HivePolicy): void;
  /** Trap-error reports (Events) keyed by Event name. */
  onTrapError(type: WatchEventType, key: string, report: NodeTrapError | undefined): void;
}

function ownerUid(d: HiveData): string | undefined {
  const refs = (d.metadata.ownerReferences ?? []) as { kind?: string; uid?: string }[];
  return refs.find((r) => r.kind === "Pod")?.uid;
}

export function createPodsController(options: PodsOptions): PodsController {
  const { writer, policyWriter, log } = options;
  const finalizerWaitMs = options.finalizerWaitMs ?? 60_000;
  let forbiddenLogged = false;
  const policies = new Map<string, HivePolicy>();
  const data = new Map<string, HiveData>();
  const trapErrors = new Map<string, NodeTrapError>();
  /** UIDs of the pods gone or finished since the last pass: the next pass removes their HiveData. */
  const gonePods = new Set<string>();
  const stats: PodsStats = {
    dataDeletedForPods: 0,
    dataDeletedForPolicies: 0,
    statusWrites: 0,
    finalizersAdded: 0,
    finalizersRemoved: 0,
  };

  /** False when admission keeps this agent off another node's HiveData: that node's discover removes it. */
  async function removeData(d: HiveData): Promise<boolean> {
    try {
      await writer.remove(d.metadata.namespace ?? "default", d.metadata.name ?? "");
    } catch (error) {
      if (!isForbidden(error)) throw error;
      if (!forbiddenLogged)
        log.info("admission keeps this agent to its own node's HiveData; other nodes clean up their own", {
          error,
        });
      forbiddenLogged = true;
      return false;
    }
    data.delete(objectKey(d));
    return true;
  }

  async function pass(): Promise<void> {
    // Pods gone or finished: their HiveData.
    for (const d of [...data.values()]) {
      const uid = ownerUid(d);
      if (uid && gonePods.has(uid) && (await removeData(d))) stats.dataDeletedForPods += 1;
    }
    // Late HiveData of a gone pod is removed by its node's discover (pod finished) or by the GC (pod deleted).
    gonePods.clear();
    if (!loop.synced()) return;
    const dataByTrap = groupByTrap(data.values(), trapOfData);
    const errorsByTrap = groupByTrap(trapErrors.values(), (e) => e.trapId);
    for (const policy of policies.values()) {
      const finalizers = policy.metadata.finalizers ?? [];
      const ns = policy.metadata.namespace ?? "default";
      const name = policy.metadata.name ?? "";
      if (policy.metadata.deletionTimestamp) {
        if (!finalizers.includes(POLICY_FINALIZER)) continue;
        let left = 0;
        for (const d of [...data.values()]) {
          const labels = d.metadata.labels ?? {};
          if (labels[LABEL_POLICY] === name && labels[LABEL_POLICY_NAMESPACE] === ns) {
            if (await removeData(d)) stats.dataDeletedForPolicies += 1;
            else left += 1;
          }
        }
        // HiveData this agent may not delete goes with its node's discover (which drops deleting policies);
        // the finalizer waits for that, but not forever: a dead node's leftovers go with their pods (ownerReference).
        const deletingSince = Date.parse(String(policy.metadata.deletionTimestamp));
        const waited = Date.now() - (Number.isNaN(deletingSince) ? 0 : deletingSince);
        if (left > 0 && waited < finalizerWaitMs) {
          runner.retryIn(Math.max(100, finalizerWaitMs - waited));
          continue;
        }
        await options.removeErrorReports?.(policy);
        await policyWriter.setFinalizers(
          policy,
          finalizers.filter((f) => f !== POLICY_FINALIZER),
        );
        stats.finalizersRemoved += 1;
        continue;
      }
      if (!finalizers.includes(POLICY_FINALIZER)) {
        await policyWriter.setFinalizers(policy, [...finalizers, POLICY_FINALIZER]);
        stats.finalizersAdded += 1;
        continue; // the update comes back through the watch, with a new resourceVersion for the status write
      }
      const problems = specProblems(policy);
      const status = problems
        ? invalidPolicyStatus(policy, problems)
        : computePolicyStatus(policy, dataByTrap, errorsByTrap);
      if (sameStatus(policy.status, status)) continue;
      try {
        await policyWriter.writeStatus(policy, status);
        stats.statusWrites += 1;
      } catch (error) {
        log.warn("HivePolicy status write failed; recomputed on the next change", {
          policy: `${ns}/${name}`,
          error,
        });
      }
    }
  }

  const loop = createReconcileLoop(pass, stats, {
    // Status is a summary: one write per half second at most while HiveData streams in.
    debounceMs: options.debounceMs ?? 500,
    onPass: options.observeReconcile,
    onError: (error) => {
      log.error("pods pass failed; retried", { error });
      runner.retryIn(1000);
    },
  });
  const { runner } = loop;

  return {
    onPod(type, pod) {
      const uid = pod.metadata?.uid;
      if (!uid) return;
      if (type === "DELETED" || isPodFinished(pod)) {
        gonePods.add(uid);
        runner.trigger();
      }
    },
    onData(type, d) {
      const key = objectKey(d);
      if (type === "DELETED") data.delete(key);
      else data.set(key, d);
      runner.trigger();
    },
    onPolicy(type, policy) {
      if (type === "DELETED") policies.delete(objectKey(policy));
      else policies.set(objectKey(policy), policy);
      runner.trigger();
    },
    onTrapError(type, key, report) {
      if (type === "DELETED" || !report) trapErrors.delete(key);
      else trapErrors.set(key, report);
      runner.trigger();
    },
    ...loop.lifecycle,
  };
}
