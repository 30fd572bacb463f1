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
 *
 * A pass reconciles each policy on its own backoff (policy-reconcile.ts: finalizer, cleanup,
 * status) and sets the gauge (uncovered-gauges.ts), then recomputes the PolicyReports.
 */
import type { V1Pod } from "@kubernetes/client-node";
import type { HiveData } from "../../api/data.ts";
import type { HivePolicy } from "../../api/policy.ts";
import type { Logger } from "../log.ts";
import type { PolicyReports, ReportSources } from "../reports/policy-reports.ts";
import { createObjectRetries } from "./object-retries.ts";
import { type PolicyInputs, PolicyReconciler } from "./policy-reconcile.ts";
import { groupByTrap, trapOfData } from "./policy-status.ts";
import {
  type DataWriter,
  type NodeTrapError,
  objectKey,
  type PolicyWriter,
  specProblems,
  type WatchEventType,
} from "./ports.ts";
import { type ControllerLifecycle, createReconcileLoop } from "./reconcile-loop.ts";
import { type PodsUncoveredGauge, UncoveredGauges } from "./uncovered-gauges.ts";

/** The part of a prom-client Gauge the pods role uses (uncovered-gauges.ts). */
export type { PodsUncoveredGauge } from "./uncovered-gauges.ts";

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
  const { log } = options;
  const policies = new Map<string, HivePolicy>();
  const data = new Map<string, HiveData>();
  const trapErrors = new Map<string, NodeTrapError>();
  const gauges = new UncoveredGauges(options.podsUncoveredGauge);
  /** Policies whose last reconcile failed, each on its own backoff. */
  const retries = createObjectRetries();
  const stats: PodsStats = {
    dataDeletedForPolicies: 0,
    statusWrites: 0,
    finalizersAdded: 0,
    finalizersRemoved: 0,
  };
  const reconciler = new PolicyReconciler({
    ...options,
    finalizerWaitMs: options.finalizerWaitMs ?? 60_000,
    data,
    gauges,
    stats,
    retryIn: (delayMs) => runner.retryIn(delayMs),
  });

  async function pass(): Promise<void> {
    if (!loop.synced()) return;
    const inputs: PolicyInputs = {
      dataByTrap: groupByTrap(data.values(), trapOfData),
      errorsByTrap: groupByTrap(trapErrors.values(), (e) => e.trapId),
      uncovered: options.uncoveredPods?.(),
    };
    gauges.retain(policies);
    const now = Date.now();
    for (const policy of policies.values()) await reconcile(policy, inputs, now);
    const failExpires = options.reports?.update(reportSources(policies, data, trapErrors, inputs.uncovered));
    const next = nextPassInMs(retries.nextDueInMs(now), failExpires);
    if (next !== undefined) runner.retryIn(Math.max(100, next));
  }

  /** A policy whose requests keep failing is retried on its own backoff; the others go on. */
  async function reconcile(policy: HivePolicy, inputs: PolicyInputs, now: number): Promise<void> {
    const key = objectKey(policy);
    if (!retries.due(key, now)) return;
    try {
      await reconciler.reconcile(policy, inputs);
      retries.forget(key);
    } catch (error) {
      const delayMs = retries.failed(key, now);
      log.warn("HivePolicy reconcile failed; retried", { policy: key, delayMs, error });
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
    onCoverage: () => runner.trigger(),
    onReportInput: () => runner.trigger(),
    ...loop.lifecycle,
    stop() {
      loop.lifecycle.stop();
      // Another agent now holds the role and reports these policies.
      gauges.end();
    },
  };
}

/** What the PolicyReports are computed from: the live, valid policies and what the nodes report. */
function reportSources(
  policies: ReadonlyMap<string, HivePolicy>,
  data: ReadonlyMap<string, HiveData>,
  trapErrors: ReadonlyMap<string, NodeTrapError>,
  uncovered: readonly V1Pod[] | undefined,
): ReportSources {
  return {
    policies: [...policies.values()].filter((p) => !p.metadata.deletionTimestamp && !specProblems(p)),
    data: data.values(),
    trapErrors: trapErrors.values(),
    uncovered,
  };
}

/**
 * When the next pass is due (ms; undefined when nothing asks for one): the earliest policy retry,
 * or when a PolicyReport's fail leaves its window. That window is days long: looked at again
 * within the hour (a timer holds at most ~24 days).
 */
function nextPassInMs(retryDueMs: number, failExpiresMs: number | undefined): number | undefined {
  const next = Math.min(
    retryDueMs,
    failExpiresMs === undefined ? Number.POSITIVE_INFINITY : Math.min(failExpiresMs, 3_600_000),
  );
  return next === Number.POSITIVE_INFINITY ? undefined : next;
}
