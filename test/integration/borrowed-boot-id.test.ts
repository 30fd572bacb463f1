/**
 * A compromised node borrows another node's kernel: its kubelet credentials may write its own
 * Node's status (NodeRestriction lets a node do so), so it reports the other kernel's boot id,
 * then holds that kernel's Lease and writes HiveData for it with its agent's token. Run through
 * a real kube-apiserver enforcing Node authorization, NodeRestriction and the component's RBAC
 * and admission policies, on a cluster that does not declare shared kernels (the default).
 */
import { CoordinationV1Api, CoreV1Api, CustomObjectsApi, V1MicroTime } from "@kubernetes/client-node";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { trapId } from "../../api/ids.ts";
import { GROUP, LABEL_KERNEL_ID, LABEL_NODE, PLURAL_DATA, VERSION } from "../../api/meta.ts";
import { rejection, statusOf } from "../cluster/testing.ts";
import {
  AGENT_NS,
  Cluster,
  eventually,
  FAST_LEASE,
  type HiveApi,
  POLICY_NS,
  startHiveApi,
} from "./harness.ts";

const KERNEL_A = "aaaaaaaa-1111-4111-8111-111111111111";
const KERNEL_B = "bbbbbbbb-2222-4222-8222-222222222222";
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

/** A node's kubelet, as the API server authenticates it (Node authorizer, NodeRestriction). */
function kubeletOf(c: Cluster, node: string): CoreV1Api {
  return c.api
    .kubeConfig({ username: `system:node:${node}`, groups: ["system:nodes", "system:authenticated"] })
    .makeApiClient(CoreV1Api);
}

/** Sets a Node's reported boot id with the given kubelet's credentials. */
async function reportBootId(kubelet: CoreV1Api, node: string, bootID: string): Promise<void> {
  const current = await kubelet.readNode({ name: node });
  const nodeInfo = { ...(current.status?.nodeInfo ?? {}), bootID } as NonNullable<
    NonNullable<typeof current.status>["nodeInfo"]
  >;
  await kubelet.replaceNodeStatus({
    name: node,
    body: { ...current, status: { ...current.status, nodeInfo } },
  });
}

describe("a node that borrows another node's boot id", () => {
  it("wins nothing: the kernel's own node keeps its Lease and never arms the borrower's HiveData", async () => {
    cluster = await Cluster.start(hive as HiveApi);
    const c = cluster;
    const said: string[] = [];
    const node1 = await c.addNode("node-1", KERNEL_A, { sharedKernels: false, logLines: said });
    await c.addNode("node-2", KERNEL_B, { sharedKernels: false });
    await c.addPod("web", "node-1");
    const trap = { path: "/etc/shadow" };
    await c.createPolicy("shadow", [trap]);
    const kernel = await eventually(() => {
      const k = node1.activeKernel();
      return k?.entries.some((e) => e.kind === "file") ? k : undefined;
    }, "kernel A armed");

    // The server lets node-2's kubelet report any boot id for node-2, and nothing for node-1.
    const kubelet2 = kubeletOf(c, "node-2");
    expect(statusOf(await rejection(reportBootId(kubelet2, "node-1", KERNEL_B)))).toMatchObject({
      code: 403,
    });
    await reportBootId(kubelet2, "node-2", KERNEL_A);
    const claimed = await c.api.kubeConfig().makeApiClient(CoreV1Api).readNode({ name: "node-2" });
    expect(claimed.status?.nodeInfo?.bootID).toBe(KERNEL_A);

    // node-2's agent holds kernel A's Lease as itself, renewing faster than any candidate.
    const name = `hive-loader-${KERNEL_A}`;
    const leases = (await c.agentKubeConfig("node-2")).makeApiClient(CoordinationV1Api);
    const takeAsNode2 = async () => {
      const lease = await leases.readNamespacedLease({ name, namespace: AGENT_NS });
      const now = new V1MicroTime();
      const spec = {
        ...lease.spec,
        holderIdentity: "node-2/hive-agent-node-2",
        renewTime: now,
        acquireTime: now,
      };
      return leases.replaceNamespacedLease({ name, namespace: AGENT_NS, body: { ...lease, spec } });
    };
    const until = performance.now() + 4 * FAST_LEASE.leaseDurationMs;
    while (performance.now() < until) {
      await takeAsNode2().catch(() => undefined); // 409 when node-1 wrote in between
      expect(node1.agent.loader(), "node-1 still loads kernel A").toBeTruthy();
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(node1.kernels).toHaveLength(1);
    expect(node1.kernels[0]?.closed).toBe(false);
    await eventually(
      async () =>
        (await leases.readNamespacedLease({ name, namespace: AGENT_NS })).spec?.holderIdentity ===
        "node-1/hive-agent-node-1",
      "kernel A's Lease back with node-1",
    );
    // Two nodes claiming one kernel is a conflict, and node-1 says so, naming the claimant.
    const conflicts = said
      .map((l) => JSON.parse(l))
      .filter((l) => l.msg.includes("claims this node's kernel"));
    expect(conflicts).toMatchObject([{ level: "error", node: "node-2", kernelId: KERNEL_A }]);

    // node-2's agent writes, as admission lets it, a HiveData of its own node for kernel A.
    await (await c.agentKubeConfig("node-2")).makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: AGENT_NS,
      plural: PLURAL_DATA,
      body: {
        apiVersion: `${GROUP}/${VERSION}`,
        kind: "HiveData",
        metadata: {
          name: "borrowed",
          labels: {
            [LABEL_NODE]: "node-2",
            [LABEL_KERNEL_ID]: KERNEL_A,
            "trap-id": trapId({ namespace: POLICY_NS, name: "shadow" }, trap),
          },
          annotations: { path: "/etc/shadow" },
        },
        spec: {
          "inode-no": "4242",
          "kernel-id": KERNEL_A,
          device: { major: 8, minor: 1 },
          accesses: ["read"],
        },
      },
    });
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect([...kernel.everWatched].some((k) => k.endsWith(":4242"))).toBe(false);
  });
});
