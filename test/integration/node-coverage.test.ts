/**
 * Every node covered, or said: the pods a policy's traps select on nodes without a ready agent
 * (a taint the DaemonSet does not tolerate, another architecture, an agent that is not Ready)
 * appear in the policy's NodesCovered condition and in hive_policy_pods_uncovered, through the
 * real agent composition and with exactly the permissions the component renders.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { HivePolicy } from "../../api/policy.ts";
import { createHiveMetrics } from "../../runtime/metrics/metrics.ts";
import { AGENT_NS, Cluster, eventually, type HiveApi, startHiveApi } from "./harness.ts";

const KERNEL_A = "11111111-1111-4111-8111-111111111111";
const KERNEL_B = "22222222-2222-4222-8222-222222222222";
const KERNEL_C = "33333333-3333-4333-8333-333333333333";

let hive: HiveApi | undefined;
beforeAll(async () => {
  hive = await startHiveApi();
});
afterAll(async () => {
  await hive?.stop();
});
let cluster: Cluster | undefined;
afterEach(async () => {
  await cluster?.stop();
  cluster = undefined;
});

const nodesCovered = (p: HivePolicy | undefined) =>
  p?.status?.conditions?.find((c) => c.type === "NodesCovered");

describe("a policy whose traps select pods on nodes without a ready agent", () => {
  it("names those pods in NodesCovered and counts them, until their nodes' agents are ready or the pods go", async () => {
    cluster = await Cluster.start(hive as HiveApi);
    const c = cluster;
    const metrics = createHiveMetrics({ processMetrics: false });
    const gauge = async () =>
      (await metrics.podsUncovered.get()).values.find(
        (v) => v.labels.policy === "web-shadow" && v.labels.policy_namespace === "hive-system",
      )?.value;

    // node-1: a ready agent, holding the pods role.
    const holder = await c.addNode("node-1", KERNEL_A, {
      agentPod: "ready",
      podsUncoveredGauge: metrics.podsUncovered,
    });
    await eventually(() => holder.agent.pods() !== undefined, "node-1 holds the pods role");
    // node-2: an agent whose Pod is not Ready (it runs, but its readiness checks fail).
    await c.addNode("node-2", KERNEL_B, { pods: false, agentPod: "notReady" });
    // node-3: no agent at all, as an arm64 node or one with a taint the DaemonSet does not tolerate.
    await c.ensureNode("node-3", KERNEL_C);

    await c.addPod("web-1", "node-1", { labels: { app: "web" } });
    await c.addPod("web-2", "node-2", { labels: { app: "web" } });
    await c.addPod("web-3", "node-3", { labels: { app: "web" } });
    await c.addPod("db-3", "node-3", { labels: { app: "db" } });
    await c.createPolicy("web-shadow", [{ path: "/etc/shadow", match: { matchLabels: { app: "web" } } }]);

    const uncovered = await eventually(async () => {
      const p = await c.getPolicy("web-shadow");
      return p?.status?.podsUncovered === 2 ? p : undefined;
    }, "two selected pods on nodes without a ready agent");
    expect(nodesCovered(uncovered)).toMatchObject({ status: "False", reason: "PodsOnNodesWithoutAgent" });
    const message = nodesCovered(uncovered)?.message ?? "";
    expect(message).toContain("default/web-2 on node-2");
    expect(message).toContain("default/web-3 on node-3");
    expect(message).not.toContain("web-1");
    expect(message).not.toContain("db-3"); // on an uncovered node, but no trap selects it
    // The pods role's own conditions are untouched: node-1's and node-2's agents watch what they can.
    expect(uncovered.status?.conditions?.[0]?.type).toBe("Ready");
    await eventually(async () => (await gauge()) === 2, "hive_policy_pods_uncovered 2");

    // node-2's agent becomes ready: only node-3's pod is left.
    await c.setAgentPodReady("hive-agent-node-2", true);
    const one = await eventually(async () => {
      const p = await c.getPolicy("web-shadow");
      return p?.status?.podsUncovered === 1 ? p : undefined;
    }, "node-2 covered");
    expect(nodesCovered(one)?.message).toContain("default/web-3 on node-3");
    expect(nodesCovered(one)?.message).not.toContain("web-2");
    await eventually(async () => (await gauge()) === 1, "hive_policy_pods_uncovered 1");

    // The last uncovered pod goes: every selected pod is on a node with a ready agent.
    await c.deletePod("web-3");
    const covered = await eventually(async () => {
      const p = await c.getPolicy("web-shadow");
      return nodesCovered(p)?.status === "True" ? p : undefined;
    }, "NodesCovered True");
    expect(nodesCovered(covered)).toMatchObject({ reason: "AllNodesCovered" });
    expect(covered.status?.podsUncovered).toBe(0);
    await eventually(async () => (await gauge()) === 0, "hive_policy_pods_uncovered 0");

    // The holder read pods only by node (the uncovered nodes') or as the DaemonSet's pods: never
    // every pod of the cluster.
    const podRequests = c.api.requests.filter(
      (r) => r.node === "node-1" && r.resource === "pods" && (r.verb === "list" || r.verb === "watch"),
    );
    const query = (q: string) => decodeURIComponent(q.replaceAll("+", " "));
    expect(podRequests.some((r) => query(r.query).includes("spec.nodeName=node-3"))).toBe(true);
    for (const r of podRequests)
      expect(
        /spec\.nodeName=node-\d/.test(query(r.query)) ||
          (r.namespace === AGENT_NS && query(r.query).includes("app.kubernetes.io/component=agent")),
        query(r.query),
      ).toBe(true);
  });

  it("forgets the gauge of a deleted policy", async () => {
    cluster = await Cluster.start(hive as HiveApi);
    const c = cluster;
    const metrics = createHiveMetrics({ processMetrics: false });
    const holder = await c.addNode("node-1", KERNEL_A, {
      agentPod: "ready",
      podsUncoveredGauge: metrics.podsUncovered,
    });
    await eventually(() => holder.agent.pods() !== undefined, "node-1 holds the pods role");
    await c.ensureNode("node-2", KERNEL_B);
    await c.addPod("web-2", "node-2", { labels: { app: "web" } });
    await c.createPolicy("web-shadow", [{ path: "/etc/shadow", match: { matchLabels: { app: "web" } } }]);
    const series = async () => (await metrics.podsUncovered.get()).values;
    await eventually(async () => (await series()).some((v) => v.value === 1), "one uncovered pod counted");
    await c.deletePolicy("web-shadow");
    await eventually(async () => (await c.getPolicy("web-shadow")) === undefined, "policy deleted");
    await eventually(async () => (await series()).length === 0, "no series left for the deleted policy");
  });
});
