/**
 * hive_policy_pods_uncovered as the pods role sets it: one series per policy, removed when the
 * policy goes or its spec becomes invalid, and all of them when the role ends (another agent then
 * holds it and reports these policies).
 */
import type { HivePolicy } from "../../api/policy.ts";
import { objectKey } from "./ports.ts";

/** The part of a prom-client Gauge the pods role uses. */
export interface PodsUncoveredGauge {
  set(labels: { policy_namespace: string; policy: string }, value: number): void;
  remove(labels: { policy_namespace: string; policy: string }): void;
}

export class UncoveredGauges {
  /** Policies whose series this role has set, by namespace/name. */
  private readonly gauged = new Map<string, { policy_namespace: string; policy: string }>();
  /** The role ended: no series is set again by a pass still running. */
  private ended = false;
  private readonly gauge: PodsUncoveredGauge | undefined;

  constructor(gauge: PodsUncoveredGauge | undefined) {
    this.gauge = gauge;
  }

  set(policy: HivePolicy, value: number): void {
    if (this.ended) return;
    const labels = {
      policy_namespace: policy.metadata.namespace ?? "default",
      policy: policy.metadata.name ?? "",
    };
    this.gauge?.set(labels, value);
    this.gauged.set(objectKey(policy), labels);
  }

  /** Removes the series of the policies not in `keep` (gone). */
  retain(keep: ReadonlyMap<string, unknown>): void {
    for (const key of [...this.gauged.keys()]) if (!keep.has(key)) this.forget(key);
  }

  forget(key: string): void {
    const labels = this.gauged.get(key);
    if (!labels) return;
    this.gauge?.remove(labels);
    this.gauged.delete(key);
  }

  /** The role ended: every series goes, and none is set again. */
  end(): void {
    this.ended = true;
    this.retain(new Map());
  }
}
