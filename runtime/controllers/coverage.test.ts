import type { V1Pod } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import type { HivePolicy, HiveTrap } from "../../api/policy.ts";
import {
  coveredNodes,
  nodesCoveredCondition,
  UNCOVERED_PODS_NAMED,
  uncoveredNodes,
  uncoveredPodsOf,
} from "./coverage.ts";

const PLATFORM = "hive-system";

function agentPod(node: string, ready: boolean | undefined, extra: Partial<V1Pod["metadata"]> = {}): V1Pod {
  return {
    metadata: { name: `hive-agent-${node}`, namespace: PLATFORM, ...extra },
    spec: { nodeName: node, containers: [{ name: "agent" }] },
    status: ready === undefined ? {} : { conditions: [{ type: "Ready", status: ready ? "True" : "False" }] },
  };
}

function pod(
  name: string,
  node: string,
  options: {
    namespace?: string;
    labels?: Record<string, string>;
    containers?: string[];
    phase?: string;
  } = {},
): V1Pod {
  return {
    metadata: { name, namespace: options.namespace ?? "default", labels: options.labels ?? {} },
    spec: { nodeName: node, containers: (options.containers ?? ["app"]).map((n) => ({ name: n })) },
    status: { phase: options.phase ?? "Running" },
  };
}

function policy(traps: HiveTrap[], namespace = PLATFORM, status?: HivePolicy["status"]): HivePolicy {
  return {
    apiVersion: "hive-operator.com/v1alpha1",
    kind: "HivePolicy",
    metadata: { name: "p", namespace, generation: 3 },
    spec: { traps },
    ...(status ? { status } : {}),
  };
}

describe("which nodes are covered", () => {
  it("counts a node covered only while one of its agent pods reports Ready", () => {
    const pods = [
      agentPod("ready", true),
      agentPod("not-ready", false),
      agentPod("starting", undefined),
      agentPod("leaving", true, { deletionTimestamp: new Date() }),
    ];
    expect([...coveredNodes(pods)]).toEqual(["ready"]);
    expect([...uncoveredNodes(["ready", "not-ready", "starting", "leaving", "no-agent"], pods)]).toEqual([
      "not-ready",
      "starting",
      "leaving",
      "no-agent",
    ]);
  });

  it("keeps a node covered during a rolling update while its new agent pod is Ready", () => {
    const old = agentPod("n", false, { name: "old" });
    const fresh = agentPod("n", true, { name: "new" });
    expect(uncoveredNodes(["n"], [old, fresh]).size).toBe(0);
  });
});

describe("the pods a policy selects on uncovered nodes", () => {
  it("applies the traps' match filters and the container-name regex, as discover does", () => {
    const pods = [
      pod("web", "n2", { labels: { app: "web" } }),
      pod("db", "n2", { labels: { app: "db" } }),
      pod("sidecar-only", "n3", { labels: { app: "web" }, containers: ["envoy"] }),
      pod("done", "n3", { labels: { app: "web" }, phase: "Succeeded" }),
    ];
    const p = policy([
      { path: "/etc/shadow", match: { matchLabels: { app: "web" }, "container-name": "app" } },
    ]);
    expect(uncoveredPodsOf(p, PLATFORM, pods)).toEqual([{ namespace: "default", name: "web", node: "n2" }]);
  });

  it("holds a tenant's policy to its own namespace, whatever its match says", () => {
    const pods = [pod("a", "n2", { namespace: "team" }), pod("b", "n2", { namespace: "other" })];
    const p = policy(
      [{ path: "/etc/shadow", match: { namespace: "other" } }, { path: "/etc/passwd" }],
      "team",
    );
    expect(uncoveredPodsOf(p, PLATFORM, pods).map((x) => x.name)).toEqual(["a"]);
  });

  it("selects nothing through a trap whose regex cannot run", () => {
    const p = policy([{ path: "/etc/shadow", match: { "container-name": "(a)\\1" } }]);
    expect(uncoveredPodsOf(p, PLATFORM, [pod("web", "n2")])).toEqual([]);
  });
});

describe("the NodesCovered condition", () => {
  const now = new Date("2026-01-01T00:00:00Z");

  it("is True when nothing selected is uncovered", () => {
    expect(nodesCoveredCondition(policy([{ path: "/x" }]), [], now)).toEqual({
      type: "NodesCovered",
      status: "True",
      reason: "AllNodesCovered",
      message: "every pod the traps select runs on a node with a ready Hive agent",
      lastTransitionTime: now.toISOString(),
      observedGeneration: 3,
    });
  });

  it("names the first pods and counts the rest", () => {
    const many = Array.from({ length: UNCOVERED_PODS_NAMED + 3 }, (_, i) => ({
      namespace: "default",
      name: `web-${String(i).padStart(2, "0")}`,
      node: "arm-1",
    }));
    const c = nodesCoveredCondition(policy([{ path: "/x" }]), many, now);
    expect(c).toMatchObject({ status: "False", reason: "PodsOnNodesWithoutAgent" });
    expect(c.message).toMatch(/^13 pods the traps select run on nodes without a ready Hive agent/);
    expect(c.message).toContain("default/web-00 on arm-1, default/web-01 on arm-1");
    const last = String(UNCOVERED_PODS_NAMED - 1).padStart(2, "0");
    expect(c.message).toContain(`default/web-${last} on arm-1 and 3 more`);
    expect(c.message).not.toContain(`web-${UNCOVERED_PODS_NAMED}`);
  });

  it("keeps its transition time while its status holds", () => {
    const earlier = "2025-06-01T00:00:00.000Z";
    const p = policy([{ path: "/x" }], PLATFORM, {
      conditions: [
        {
          type: "NodesCovered",
          status: "False",
          reason: "PodsOnNodesWithoutAgent",
          message: "",
          lastTransitionTime: earlier,
        },
      ],
    });
    const still = nodesCoveredCondition(p, [{ namespace: "default", name: "a", node: "n" }], now);
    expect(still.lastTransitionTime).toBe(earlier);
    expect(nodesCoveredCondition(p, [], now).lastTransitionTime).toBe(now.toISOString());
  });
});
