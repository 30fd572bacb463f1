import type { V1Pod } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import type { HivePolicy } from "../../api/policy.ts";
import { UncoveredGrace } from "./coverage-feeds.ts";
import { coverageStatus, finalizerWaitLeft } from "./policy-reconcile.ts";

const policy: HivePolicy = {
  apiVersion: "hive-operator.com/v1alpha1",
  kind: "HivePolicy",
  metadata: { name: "p", namespace: "hive", generation: 1 },
  spec: { traps: [{ path: "/etc/shadow" }] },
};

describe("a deleting policy's finalizer", () => {
  it("waits for other nodes' HiveData from the policy's deletion on", () => {
    const deleted = new Date(10_000).toISOString();
    expect(finalizerWaitLeft(deleted, 60_000, 40_000)).toBe(30_000);
    expect(finalizerWaitLeft(deleted, 60_000, 70_000)).toBe(0);
    expect(finalizerWaitLeft("not a time", 60_000, 70_000)).toBeLessThan(0);
  });
});

describe("a policy's coverage in its status", () => {
  it("keeps the previous NodesCovered, with no count, while coverage is not known", () => {
    const previous = {
      type: "NodesCovered",
      status: "True",
      reason: "AllCovered",
      message: "",
      lastTransitionTime: "",
    };
    const known = { ...policy, status: { podsUncovered: 0, conditions: [previous] } } as HivePolicy;
    expect(coverageStatus(known, { conditions: [] }, undefined, "hive")).toEqual({
      status: { podsUncovered: 0, conditions: [previous] },
    });
    expect(coverageStatus(policy, { conditions: [] }, undefined, "hive")).toEqual({
      status: { conditions: [] },
    });
  });

  it("counts the uncovered pods once they are known", () => {
    const out = coverageStatus(policy, { conditions: [] }, [] as V1Pod[], "hive");
    expect(out.uncovered).toBe(0);
    expect(out.status.podsUncovered).toBe(0);
    expect(out.status.conditions?.map((c) => c.type)).toEqual(["NodesCovered"]);
  });
});

describe("a node without a ready agent", () => {
  it("counts as uncovered once its grace is over, and starts over once covered", () => {
    const grace = new UncoveredGrace(1000);
    expect(grace.due(new Set(["a"]), 0)).toEqual({ due: new Set(), nextAt: 1000 });
    expect(grace.due(new Set(["a", "b"]), 1000)).toEqual({ due: new Set(["a"]), nextAt: 2000 });
    expect(grace.due(new Set(["b"]), 1500)).toEqual({ due: new Set(), nextAt: 2000 });
    expect(grace.due(new Set(["a", "b"]), 2000)).toEqual({ due: new Set(["b"]), nextAt: 3000 });
  });
});
