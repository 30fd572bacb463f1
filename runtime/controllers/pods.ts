/**
 * Pods controller (one per cluster, elected): the cluster-wide duties that need a single writer.
 * - HivePolicy finalizer: added to live policies; on deletion the policy's HiveData and
 *   trap-error Events are removed, then the finalizer.
 * - HivePolicy status: aggregated from HiveData + the nodes' trap-error reports, written
 *   only on change.
 * - NodesCovered: the pods its traps select on nodes without a ready agent (coverage.ts), from the
 *   pods of those nodes only (coverage-feeds.ts), counted in hive_policy_pods_uncovered.
 * It caches no other pods: the HiveData of a pod that finished or was deleted is removed by the
 * discover controller of the pod's node, which watches that node's pods anyway (and is the only
 * agent admission lets delete it); the HiveData of a node that left the cluster goes with its
 * Node, which owns it. A cache of every pod of the cluster here would make the elected agent's memory
 * grow with the cluster's size.
 */
import type { V1Pod } from "@kubernetes/client-node";
import type { HiveData } from "../../api/data.ts";
import { LABEL_NODE, LABEL_POLICY, LABEL_POLICY_NAMESPACE, POLICY_FINALIZER } from "../../api/meta.ts";
import type { HivePolicy, HivePolicyStatus } from "../../api/policy.ts";
import type { Logger } from "../log.ts";
import type { PolicyReports } from "../reports/policy-reports.ts";
import { NODES_COVERED, nodesCoveredCondition, uncoveredPodsOf } from "./coverage.ts";
import { createObjectRetries } from "./object-retries.ts";
import {
  computePolicyStatus,
  groupByTrap,
  invalidPolicyStatus,
  sameStatus,
  trapOfData,
} from "./policy-status.ts";
import {
  type DataWriter,
  type NodeTrapError,
  objectKey,
  type PolicyWriter,
  specProblems,
  type WatchEventType,
} from "./ports.ts";
import { type ControllerLifecycle, createReconcileLoop } from "./reconcile-loop.ts";

export interface PodsOptions {
  /** This agent's node: of a deleted policy's HiveData it removes only its own (admission's rule). */
  nodeName: string;
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
  /** The monitor's namespace: its policies reach every namespace's pods, others only their own (match.ts). */
  platformNamespace: string;
  /** The pods on nodes without a ready agent; undefined while not yet known (coverage-feeds.ts). */
  uncoveredPods?: () => readonly V1Pod[] | undefined;
  /** hive_policy_pods_uncovered, set per policy and removed with it (or when the role ends). */
  podsUncoveredGauge?: PodsUncoveredGauge;
  /** The namespaces' PolicyReports, recomputed on passes (runtime/reports/; their feeds start and stop them). */
  reports?: PolicyReports;
}

/** The part of a prom-client Gauge the pods role uses. */
export interface PodsUncoveredGauge {
  set(labels: { policy_namespace: string; policy: string }, value: number): void;
  remove(labels: { policy_namespace: string; policy: string }): void;
}

export interface PodsStats {
  dataDeletedForPolicies: number;
  statusWrites: number;
  finalizersAdded: number;
  finalizersRemoved: number;
}

export interface PodsController extends ControllerLifecycle<PodsStats> {
  onData(type: WatchEventType, data: HiveData): void;
  onPolicy(type: WatchEventType, policy: HivePolicy): void;
  /** Trap-error reports (Events) keyed by Event name. */
  onTrapError(type: WatchEventType, key: string, report: NodeTrapError | undefined): void;
  /** Nodes, agent readiness or the pods of uncovered nodes changed. */
  onCoverage(): void;
  /** An access Event or a PolicyReport changed (given to `reports` first). */
  onReportInput(): void;
}

export function createPodsController(options: PodsOptions): PodsController {
  const { writer, policyWriter, log } = options;
  const finalizerWaitMs = options.finalizerWaitMs ?? 60_000;
  const policies = new Map<string, HivePolicy>();
  const data = new Map<string, HiveData>();
  const trapErrors = new Map<string, NodeTrapError>();
  /** Policies whose hive_policy_pods_uncovered this role has set (removed when they go). */
  const gauged = new Map<string, { policy_namespace: string; policy: string }>();
  /** The role ended: no gauge is set again by a pass still running. */
  let ended = false;
  /** Policies whose last reconcile failed, each on its own backoff. */
  const retries = createObjectRetries();
  const stats: PodsStats = {
    dataDeletedForPolicies: 0,
    statusWrites: 0,
    finalizersAdded: 0,
    finalizersRemoved: 0,
  };

  /** Removes this node's HiveData; false for another node's, which its own discover removes. */
  async function removeData(d: HiveData): Promise<boolean> {
    if (d.metadata.labels?.[LABEL_NODE] !== options.nodeName) return false;
    await writer.remove(d.metadata.namespace ?? "default", d.metadata.name ?? "");
    data.delete(objectKey(d));
    return true;
  }

  /** One policy's finalizer, HiveData cleanup and status: throws when a request fails. */
  /**
   * Adds NodesCovered and podsUncovered to `status` and sets the gauge; while coverage is not yet
   * known (the role just started) the policy's previous NodesCovered stands, so it does not flap.
   */
  function withCoverage(
    policy: HivePolicy,
    status: HivePolicyStatus,
    pods: readonly V1Pod[] | undefined,
  ): HivePolicyStatus {
    const labels = {
      policy_namespace: policy.metadata.namespace ?? "default",
      policy: policy.metadata.name ?? "",
    };
    if (pods === undefined) {
      const previous = policy.status?.conditions?.find((c) => c.type === NODES_COVERED);
      if (!previous) return status;
      return {
        ...status,
        ...(policy.status?.podsUncovered !== undefined ? { podsUncovered: policy.status.podsUncovered } : {}),
        conditions: [...(status.conditions ?? []), previous],
      };
    }
    const found = uncoveredPodsOf(policy, options.platformNamespace, pods);
    if (!ended) {
      options.podsUncoveredGauge?.set(labels, found.length);
      gauged.set(objectKey(policy), labels);
    }
    return {
      ...status,
      podsUncovered: found.length,
      conditions: [...(status.conditions ?? []), nodesCoveredCondition(policy, found)],
    };
  }

  async function reconcile(
    policy: HivePolicy,
    dataByTrap: ReadonlyMap<string, HiveData[]>,
    errorsByTrap: ReadonlyMap<string, NodeTrapError[]>,
    uncovered: readonly V1Pod[] | undefined,
  ): Promise<void> {
    const finalizers = policy.metadata.finalizers ?? [];
    const ns = policy.metadata.namespace ?? "default";
    const name = policy.metadata.name ?? "";
    if (policy.metadata.deletionTimestamp) {
      if (!finalizers.includes(POLICY_FINALIZER)) return;
      let left = 0;
      for (const d of [...data.values()]) {
        const labels = d.metadata.labels ?? {};
        if (labels[LABEL_POLICY] === name && labels[LABEL_POLICY_NAMESPACE] === ns) {
          if (await removeData(d)) stats.dataDeletedForPolicies += 1;
          else left += 1;
        }
      }
      // Another node's HiveData goes with that node's discover (which drops deleting policies); the
      // finalizer waits for that, but not forever: a node that never returns takes its HiveData
      // with it (the Node owns it), and one that returns removes it on its first pass.
      const deletingSince = Date.parse(String(policy.metadata.deletionTimestamp));
      const waited = Date.now() - (Number.isNaN(deletingSince) ? 0 : deletingSince);
      if (left > 0 && waited < finalizerWaitMs) {
        runner.retryIn(Math.max(100, finalizerWaitMs - waited));
        return;
      }
      await options.removeErrorReports?.(policy);
      await policyWriter.setFinalizers(
        policy,
        finalizers.filter((f) => f !== POLICY_FINALIZER),
      );
      stats.finalizersRemoved += 1;
      return;
    }
    if (!finalizers.includes(POLICY_FINALIZER)) {
      await policyWriter.setFinalizers(policy, [...finalizers, POLICY_FINALIZER]);
      stats.finalizersAdded += 1;
      return; // the update comes back through the watch, with a new resourceVersion for the status write
    }
    const problems = specProblems(policy);
    // An invalid policy selects nothing: it has no NodesCovered and no gauge.
    if (problems) forgetGauge(objectKey(policy));
    const status = problems
      ? invalidPolicyStatus(policy, problems)
      : withCoverage(policy, computePolicyStatus(policy, dataByTrap, errorsByTrap), uncovered);
    if (sameStatus(policy.status, status)) return;
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

  /** Removes the gauge of policies that are gone (all of them when the role ends: `keep` empty). */
  function forgetGauges(keep: ReadonlyMap<string, unknown> = policies): void {
    for (const key of [...gauged.keys()]) if (!keep.has(key)) forgetGauge(key);
  }

  function forgetGauge(key: string): void {
    const labels = gauged.get(key);
    if (!labels) return;
    options.podsUncoveredGauge?.remove(labels);
    gauged.delete(key);
  }

  async function pass(): Promise<void> {
    if (!loop.synced()) return;
    const dataByTrap = groupByTrap(data.values(), trapOfData);
    const errorsByTrap = groupByTrap(trapErrors.values(), (e) => e.trapId);
    const uncovered = options.uncoveredPods?.();
    forgetGauges();
    const now = Date.now();
    for (const policy of policies.values()) {
      const key = objectKey(policy);
      if (!retries.due(key, now)) continue;
      // A policy whose requests keep failing is retried on its own backoff; the others go on.
      try {
        await reconcile(policy, dataByTrap, errorsByTrap, uncovered);
        retries.forget(key);
      } catch (error) {
        const delayMs = retries.failed(key, now);
        log.warn("HivePolicy reconcile failed; retried", { policy: key, delayMs, error });
      }
    }
    const failExpires = options.reports?.update({
      policies: [...policies.values()].filter((p) => !p.metadata.deletionTimestamp && !specProblems(p)),
      data: data.values(),
      trapErrors: trapErrors.values(),
      uncovered,
    });
    // A fail leaves its window in days: looked at again within the hour (a timer holds at most ~24 days).
    const next = Math.min(
      retries.nextDueInMs(now),
      failExpires === undefined ? Number.POSITIVE_INFINITY : Math.min(failExpires, 3_600_000),
    );
    if (next !== Number.POSITIVE_INFINITY) runner.retryIn(Math.max(100, next));
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
    onCoverage() {
      runner.trigger();
    },
    onReportInput() {
      runner.trigger();
    },
    ...loop.lifecycle,
    stop() {
      ended = true;
      loop.lifecycle.stop();
      // Another agent now holds the role and reports these policies.
      forgetGauges(new Map());
    },
  };
}
