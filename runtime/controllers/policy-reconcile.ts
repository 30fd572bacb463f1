/**
 * One HivePolicy reconciled by the pods role, in the order its lifecycle needs:
 * - being deleted: this node's HiveData of it removed, the other nodes' waited for (not forever),
 *   then its trap-error Events, then the finalizer;
 * - without the finalizer: the finalizer added, and nothing else (the update comes back through
 *   the watch, with a new resourceVersion for the status write);
 * - otherwise its status (traps, NodesCovered), written only when it changed.
 */
import type { V1Pod } from "@kubernetes/client-node";
import type { HiveData } from "../../api/data.ts";
import { LABEL_NODE, LABEL_POLICY, LABEL_POLICY_NAMESPACE, POLICY_FINALIZER } from "../../api/meta.ts";
import type { HivePolicy, HivePolicyStatus } from "../../api/policy.ts";
import type { Logger } from "../log.ts";
import { NODES_COVERED, nodesCoveredCondition, uncoveredPodsOf } from "./coverage.ts";
import { computePolicyStatus, invalidPolicyStatus, sameStatus } from "./policy-status.ts";
import { type DataWriter, type NodeTrapError, objectKey, type PolicyWriter, specProblems } from "./ports.ts";
import type { UncoveredGauges } from "./uncovered-gauges.ts";

/** What a pass knows of every policy at once. */
export interface PolicyInputs {
  dataByTrap: ReadonlyMap<string, HiveData[]>;
  errorsByTrap: ReadonlyMap<string, NodeTrapError[]>;
  /** The pods on nodes without a ready agent; undefined while not yet known. */
  uncovered: readonly V1Pod[] | undefined;
}

/**
 * `status` with NodesCovered and podsUncovered, and how many pods are uncovered (for the gauge);
 * while coverage is not yet known (`pods` undefined: the role just started) the policy's previous
 * NodesCovered stands, so it does not flap, and no count is given.
 */
export function coverageStatus(
  policy: HivePolicy,
  status: HivePolicyStatus,
  pods: readonly V1Pod[] | undefined,
  platformNamespace: string,
): { status: HivePolicyStatus; uncovered?: number } {
  if (pods === undefined) {
    const previous = policy.status?.conditions?.find((c) => c.type === NODES_COVERED);
    if (!previous) return { status };
    return {
      status: {
        ...status,
        ...(policy.status?.podsUncovered !== undefined ? { podsUncovered: policy.status.podsUncovered } : {}),
        conditions: [...(status.conditions ?? []), previous],
      },
    };
  }
  const found = uncoveredPodsOf(policy, platformNamespace, pods);
  return {
    status: {
      ...status,
      podsUncovered: found.length,
      conditions: [...(status.conditions ?? []), nodesCoveredCondition(policy, found)],
    },
    uncovered: found.length,
  };
}

/**
 * How much longer a deleting policy's finalizer waits for other nodes' HiveData (ms; none left
 * when not positive), counted from its deletion (from the epoch when that cannot be read).
 */
export function finalizerWaitLeft(deletionTimestamp: unknown, waitMs: number, now: number): number {
  const deletingSince = Date.parse(String(deletionTimestamp));
  return waitMs - (now - (Number.isNaN(deletingSince) ? 0 : deletingSince));
}

export interface PolicyReconcilerOptions {
  /** This agent's node: of a deleted policy's HiveData it removes only its own (admission's rule). */
  nodeName: string;
  writer: DataWriter;
  policyWriter: PolicyWriter;
  removeErrorReports?: ((policy: HivePolicy) => Promise<void>) | undefined;
  log: Logger;
  finalizerWaitMs: number;
  platformNamespace: string;
  /** The role's HiveData, by namespace/name: one this role removes leaves it at once. */
  data: Map<string, HiveData>;
  gauges: UncoveredGauges;
  stats: {
    dataDeletedForPolicies: number;
    statusWrites: number;
    finalizersAdded: number;
    finalizersRemoved: number;
  };
  /** Asks for another pass in `delayMs`. */
  retryIn: (delayMs: number) => void;
}

export class PolicyReconciler {
  private readonly o: PolicyReconcilerOptions;

  constructor(options: PolicyReconcilerOptions) {
    this.o = options;
  }

  /** One policy's finalizer, HiveData cleanup and status: throws when a request fails. */
  async reconcile(policy: HivePolicy, inputs: PolicyInputs): Promise<void> {
    const finalizers = policy.metadata.finalizers ?? [];
    if (policy.metadata.deletionTimestamp) {
      if (finalizers.includes(POLICY_FINALIZER)) await this.finalize(policy, finalizers);
      return;
    }
    if (!finalizers.includes(POLICY_FINALIZER)) {
      await this.o.policyWriter.setFinalizers(policy, [...finalizers, POLICY_FINALIZER]);
      this.o.stats.finalizersAdded += 1;
      return;
    }
    await this.writeStatus(policy, inputs);
  }

  private async finalize(policy: HivePolicy, finalizers: readonly string[]): Promise<void> {
    const left = await this.removeOwnData(policy);
    // Another node's HiveData goes with that node's discover (which drops deleting policies); the
    // finalizer waits for that, but not forever: a node that never returns takes its HiveData
    // with it (the Node owns it), and one that returns removes it on its first pass.
    const waitLeft = finalizerWaitLeft(policy.metadata.deletionTimestamp, this.o.finalizerWaitMs, Date.now());
    if (left > 0 && waitLeft > 0) {
      this.o.retryIn(Math.max(100, waitLeft));
      return;
    }
    await this.o.removeErrorReports?.(policy);
    await this.o.policyWriter.setFinalizers(
      policy,
      finalizers.filter((f) => f !== POLICY_FINALIZER),
    );
    this.o.stats.finalizersRemoved += 1;
  }

  /** Removes this node's HiveData of `policy`; returns how many other nodes' are left (their discover's). */
  private async removeOwnData(policy: HivePolicy): Promise<number> {
    const ns = policy.metadata.namespace ?? "default";
    const name = policy.metadata.name ?? "";
    let left = 0;
    for (const d of [...this.o.data.values()]) {
      const labels = d.metadata.labels ?? {};
      if (labels[LABEL_POLICY] !== name || labels[LABEL_POLICY_NAMESPACE] !== ns) continue;
      if (labels[LABEL_NODE] !== this.o.nodeName) {
        left += 1;
        continue;
      }
      await this.o.writer.remove(d.metadata.namespace ?? "default", d.metadata.name ?? "");
      this.o.data.delete(objectKey(d));
      this.o.stats.dataDeletedForPolicies += 1;
    }
    return left;
  }

  private async writeStatus(policy: HivePolicy, inputs: PolicyInputs): Promise<void> {
    const problems = specProblems(policy);
    // An invalid policy selects nothing: it has no NodesCovered and no gauge.
    if (problems) this.o.gauges.forget(objectKey(policy));
    const status = problems
      ? invalidPolicyStatus(policy, problems)
      : this.withCoverage(
          policy,
          computePolicyStatus(policy, inputs.dataByTrap, inputs.errorsByTrap),
          inputs,
        );
    if (sameStatus(policy.status, status)) return;
    try {
      await this.o.policyWriter.writeStatus(policy, status);
      this.o.stats.statusWrites += 1;
    } catch (error) {
      this.o.log.warn("HivePolicy status write failed; recomputed on the next change", {
        policy: `${policy.metadata.namespace ?? "default"}/${policy.metadata.name ?? ""}`,
        error,
      });
    }
  }

  private withCoverage(policy: HivePolicy, status: HivePolicyStatus, inputs: PolicyInputs): HivePolicyStatus {
    const covered = coverageStatus(policy, status, inputs.uncovered, this.o.platformNamespace);
    if (covered.uncovered !== undefined) this.o.gauges.set(policy, covered.uncovered);
    return covered.status;
  }
}
