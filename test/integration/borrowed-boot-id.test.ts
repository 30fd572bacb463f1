/**
 * A compromised node borrows another node's kernel: its kubelet credentials may write its own
 * Node's status (NodeRestriction lets a node do so), so it reports the other kernel's boot id,
 * then holds that kernel's Lease and writes HiveData for it with its agent's token. Run through
 * a real kube-apiserver enforcing Node authorization, NodeRestriction and the component's RBAC
 * and admission policies, on a cluster that does not declare shared kernels (the default).
 */
import { CoreV1Api } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { rejection, statusOf } from "../cluster/testing.ts";
import { clusterPerTest } from "./cluster-per-test.ts";
import type { Cluster } from "./harness.ts";
import { armedOnNode1, holdLeaseAgainst, plantDataFor } from "./node-attack.ts";

const KERNEL_A = "aaaaaaaa-1111-4111-8111-111111111111";
const KERNEL_B = "bbbbbbbb-2222-4222-8222-222222222222";
const startCluster = clusterPerTest();

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
    const c = await startCluster();
    const said: string[] = [];
    const { node1, kernel } = await armedOnNode1(c, KERNEL_A, KERNEL_B, {
      sharedKernels: false,
      logLines: said,
    });

    // The server lets node-2's kubelet report any boot id for node-2, and nothing for node-1.
    const kubelet2 = kubeletOf(c, "node-2");
    expect(statusOf(await rejection(reportBootId(kubelet2, "node-1", KERNEL_B)))).toMatchObject({
      code: 403,
    });
    await reportBootId(kubelet2, "node-2", KERNEL_A);
    const claimed = await c.api.kubeConfig().makeApiClient(CoreV1Api).readNode({ name: "node-2" });
    expect(claimed.status?.nodeInfo?.bootID).toBe(KERNEL_A);

    // node-2's agent holds kernel A's Lease as itself, renewing faster than any candidate.
    await holdLeaseAgainst(c, "node-2", KERNEL_A, node1);
    // Two nodes claiming one kernel is a conflict, and node-1 says so, naming the claimant.
    const conflicts = said
      .map((l) => JSON.parse(l))
      .filter((l) => l.msg.includes("acts for this node's kernel"));
    expect(conflicts).toMatchObject([
      { level: "error", node: "node-2", kernelId: KERNEL_A, reportedBootId: KERNEL_A },
    ]);

    // node-2's agent writes, as admission lets it, a HiveData of its own node for kernel A.
    await plantDataFor(c, "node-2", KERNEL_A, kernel);
  });
});
