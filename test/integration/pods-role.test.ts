/**
 * The pods role at cluster scale: it caches no pods but the agent's own and those of nodes without
 * a ready agent (its memory must not grow with the cluster), and the HiveData of a pod that finished or was deleted still goes, removed by the discover of
 * the pod's own node.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { AGENT_NS, Cluster, eventually, type HiveApi, startHiveApi } from "./harness.ts";

const KERNEL_A = "11111111-1111-4111-8111-111111111111";
const KERNEL_B = "22222222-2222-4222-8222-222222222222";

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

const podNames = async (c: Cluster) =>
  (await c.data()).map((d) => String(d.metadata.annotations?.pod_name)).sort();

describe("the pods role", () => {
  it("lists and watches no pods of nodes with a ready agent, while finished and deleted pods lose their HiveData", async () => {
    cluster = await Cluster.start(hive as HiveApi);
    const c = cluster;
    // node-2 holds the pods role; node-1 runs the pods' discover and does not compete for the role.
    const holder = await c.addNode("node-2", KERNEL_B, { agentPod: "ready" });
    await eventually(() => holder.agent.pods() !== undefined, "node-2 holds the pods role");
    await c.addNode("node-1", KERNEL_A, { pods: false, agentPod: "ready" });
    for (const name of ["stays", "job", "doomed"]) await c.addPod(name, "node-1");
    await c.createPolicy("shadow", [{ path: "/etc/shadow" }]);
    await eventually(async () => (await podNames(c)).join() === "doomed,job,stays", "three HiveData");
    await eventually(
      async () => (await c.getPolicy("shadow"))?.status?.traps?.[0]?.inodesFound === 3,
      "the pods role writes the status",
    );

    await c.setPodPhase("job", "Succeeded");
    await c.deletePod("doomed");
    await eventually(
      async () => (await podNames(c)).join() === "stays",
      "HiveData of the finished and the deleted pod removed",
    );
    await eventually(
      async () => (await c.getPolicy("shadow"))?.status?.traps?.[0]?.inodesFound === 1,
      "status follows",
    );
    // Only the holder's own node's pods, by field selector, and the agent's pods (whose Ready
    // condition tells covered nodes): no cache of every pod in the cluster, nor of node-1's.
    const podRequests = c.api.requests.filter(
      (r) => r.node === "node-2" && r.resource === "pods" && (r.verb === "list" || r.verb === "watch"),
    );
    expect(podRequests.length).toBeGreaterThan(0);
    for (const r of podRequests) {
      const query = decodeURIComponent(r.query.replaceAll("+", " "));
      if (r.namespace === AGENT_NS && query.includes("app.kubernetes.io/component=agent")) continue;
      expect(query).toContain("spec.nodeName=node-2");
    }
    expect(
      (await c.getPolicy("shadow"))?.status?.conditions?.find((x) => x.type === "NodesCovered"),
    ).toMatchObject({ status: "True" });
  });
});

describe("a node that leaves the cluster", () => {
  it("takes its HiveData with it (the Node owns it), which no other agent may delete", async () => {
    cluster = await Cluster.start(hive as HiveApi);
    const c = cluster;
    const node1 = await c.addNode("node-1", KERNEL_A);
    const node2 = await c.addNode("node-2", KERNEL_B);
    await c.addPod("web-1", "node-1");
    await c.addPod("web-2", "node-2");
    await c.createPolicy("shadow", [{ path: "/etc/shadow" }]);
    await eventually(async () => (await podNames(c)).join() === "web-1,web-2", "both nodes' HiveData");
    const node2Uid = (await c.admin.core.readNode({ name: "node-2" })).metadata?.uid;
    const owners = (await c.data()).find((d) => d.metadata.annotations?.pod_name === "web-2")?.metadata
      .ownerReferences;
    expect(owners).toEqual([{ apiVersion: "v1", kind: "Node", name: "node-2", uid: node2Uid }]);

    // node-2 dies and is removed from the cluster, as a cloud's node lifecycle controller does;
    // kube-controller-manager's garbage collector deletes what the Node owned.
    await node2.agent.stop();
    await c.admin.core.deleteNode({ name: "node-2" });
    // The garbage collector watches a custom resource only from its next discovery of the API's
    // resources (every 30 s), which may come after the CRD was installed for this file.
    await eventually(
      async () => (await podNames(c)).join() === "web-1",
      "node-2's HiveData gone with its Node",
      45_000,
    );
    expect(node1.agent.discover.stats().deleted).toBe(0);
  });
});
