/**
 * Several nodes against one real API server: one loader per kernel (nodes sharing a
 * kernel elect one; two kernels get two), failover when the loader's node dies, a kernel that
 * stays watched through an API-server outage with still one loader after it, and an API
 * server restart in the middle of every watch. The server runs without its watch cache, so that
 * a compaction of etcd expires the informers' watches (410 Gone) as it does a cache's window.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { LABEL_KERNEL_ID } from "../../api/meta.ts";
import { addNodeAgentReadinessChecks } from "../../runtime/agent/kernel-readiness.ts";
import { createHealth, type Health } from "../../runtime/metrics/health.ts";
import { Cluster, eventually, FAST_LEASE, type HiveApi, type SimNode, startHiveApi } from "./harness.ts";

const KERNEL_A = "aaaaaaaa-1111-4111-8111-111111111111";
const KERNEL_B = "bbbbbbbb-2222-4222-8222-222222222222";

let hive: HiveApi | undefined;
beforeAll(async () => {
  hive = await startHiveApi({ watchCache: false });
});
afterAll(async () => {
  await hive?.stop();
});
let cluster: Cluster | undefined;
afterEach(async () => {
  await cluster?.stop();
  cluster = undefined;
});

const fileSlots = (c: Cluster, kernelId: string) =>
  c
    .loadersOf(kernelId)[0]
    ?.activeKernel()
    ?.entries.filter((e) => e.kind === "file").length ?? -1;

/** The node agent's readiness checks as `hive agent` serves them on /readyz. */
function readinessOf(node: SimNode): Health {
  const health = createHealth();
  addNodeAgentReadinessChecks(health, node.agent, () => node.activeKernel());
  return health;
}
const failing = async (health: Health) =>
  (await health.readiness()).checks.filter((c) => !c.ok).map((c) => `${c.name}: ${c.message}`);

describe("elections and resilience", () => {
  it("elects one loader for nodes sharing a kernel and one per kernel, each watching only its kernel's HiveData", async () => {
    cluster = await Cluster.start(hive as HiveApi);
    const c = cluster;
    await c.addNode("node-1", KERNEL_A);
    await c.addNode("node-2", KERNEL_A);
    await c.addNode("node-3", KERNEL_B);
    for (const n of ["node-1", "node-2", "node-3"]) await c.addPod(`pod-${n}`, n);
    await c.createPolicy("shadow", [{ path: "/etc/shadow" }]);
    await eventually(async () => (await c.data()).length === 3, "three HiveData");
    await eventually(
      () => fileSlots(c, KERNEL_A) === 2 && fileSlots(c, KERNEL_B) === 1,
      "both kernels synced",
    );
    expect(c.loadersOf(KERNEL_A)).toHaveLength(1);
    expect(c.loadersOf(KERNEL_B).map((n) => n.name)).toEqual(["node-3"]);
    const data = await c.data();
    expect(data.filter((d) => d.metadata.labels?.[LABEL_KERNEL_ID] === KERNEL_A)).toHaveLength(2);
    // Exactly one pods-role holder in the cluster.
    expect(c.nodes.filter((n) => n.agent.pods() !== undefined)).toHaveLength(1);
  });

  it("fails over the loader and the pods role when the holder dies, never running two at once", async () => {
    cluster = await Cluster.start(hive as HiveApi);
    const c = cluster;
    const first = await c.addNode("node-1", KERNEL_A);
    await eventually(
      () => first.agent.loader() !== undefined && first.agent.pods() !== undefined,
      "first node leads",
    );
    const second = await c.addNode("node-2", KERNEL_A);
    await c.addPod("web", "node-2");
    await c.createPolicy("shadow", [{ path: "/etc/shadow" }]);
    await eventually(() => fileSlots(c, KERNEL_A) === 1, "kernel synced by the first loader");

    let overlap = 0;
    const sampler = setInterval(() => {
      if (c.loadersOf(KERNEL_A).length > 1) overlap += 1;
    }, 5);
    // A crash: the roles stop without releasing the Leases, so the other node must wait them out.
    const died = Date.now();
    await first.agent.stop({ release: false });
    await eventually(
      () => second.agent.loader() !== undefined && second.agent.pods() !== undefined,
      "second node takes over",
      FAST_LEASE.leaseDurationMs * 3,
    );
    const tookOver = Date.now() - died;
    clearInterval(sampler);
    expect(overlap).toBe(0);
    // Waited out the Lease: from the crashed holder's last renewal, which came up to one renew
    // period (the retry period here, with its jitter) before it died.
    expect(tookOver).toBeGreaterThanOrEqual(
      FAST_LEASE.leaseDurationMs - FAST_LEASE.retryPeriodMs * 1.2 - 100,
    );
    expect(tookOver).toBeLessThan(FAST_LEASE.leaseDurationMs * 3);
    // The new loader syncs its kernel from the HiveData alone.
    await eventually(
      () => second.activeKernel()?.entries.some((e) => e.kind === "file"),
      "new loader synced",
    );
    // A clean shutdown hands over at once (Lease released).
    const third = await c.addNode("node-3", KERNEL_A);
    const t0 = Date.now();
    await second.agent.stop();
    await eventually(() => third.agent.loader() !== undefined, "third node takes over after release");
    expect(Date.now() - t0).toBeLessThan(FAST_LEASE.leaseDurationMs);
  });

  it("keeps the kernel program attached and alerting while the API server is unreachable, long past any renew deadline", {
    timeout: 90_000,
  }, async () => {
    cluster = await Cluster.start(hive as HiveApi);
    const c = cluster;
    const node = await c.addNode("node-1", KERNEL_A);
    await eventually(() => node.agent.loader() !== undefined, "node-1 loads the kernel");
    const other = await c.addNode("node-2", KERNEL_A); // shares the kernel (kind)
    await c.addPod("web", "node-1");
    await c.createPolicy("shadow", [{ path: "/etc/shadow" }]);
    await eventually(() => fileSlots(c, KERNEL_A) === 1, "kernel synced");
    const kernel = node.activeKernel();
    const file = kernel?.entries.find((e) => e.kind === "file");

    const outage = c.api.restart({ downtimeMs: FAST_LEASE.leaseDurationMs * 4 });
    await new Promise((r) => setTimeout(r, FAST_LEASE.leaseDurationMs * 2));
    // The control plane is gone: the pods role (cluster-wide Lease) may stop; the kernel must not.
    expect(node.agent.loader()).toBeDefined();
    expect(kernel?.closed).toBe(false);
    kernel?.emit({ slot: file?.slot ?? -1, kind: "file" });
    expect(node.accesses.map((a) => a.matched.map((d) => d.metadata.labels?.[LABEL_KERNEL_ID]))).toEqual([
      [KERNEL_A],
    ]);
    await outage;
    // Back: node-1's program was never reopened. Whichever node won the Lease when the API
    // server returned, the shared kernel ends with exactly one loader, and it is synced.
    expect(node.kernels).toHaveLength(1);
    await new Promise((r) => setTimeout(r, FAST_LEASE.leaseDurationMs * 2));
    const loaders = await eventually(() => {
      const now = c.loadersOf(KERNEL_A);
      return now.length === 1 ? now : undefined;
    }, "one loader for the shared kernel");
    await eventually(
      () => loaders[0]?.activeKernel()?.entries.some((e) => e.kind === "file"),
      "the loader's kernel map holds the trapped file",
    );
    expect(node.kernels.length + other.kernels.length).toBeLessThanOrEqual(2);
  });

  it("keeps working across an API server restart mid-watch", async () => {
    cluster = await Cluster.start(hive as HiveApi);
    const c = cluster;
    const node = await c.addNode("node-1", KERNEL_A);
    await c.addPod("before", "node-1");
    await c.createPolicy("shadow", [{ path: "/etc/shadow" }]);
    await eventually(async () => (await c.data()).length === 1, "first HiveData");
    await c.api.restart({ downtimeMs: 300 });
    await c.addPod("after", "node-1");
    await eventually(
      async () => (await c.data()).length === 2,
      "HiveData of a pod created after the restart",
    );
    await eventually(
      () => node.activeKernel()?.entries.filter((e) => e.kind === "file").length === 2,
      "kernel map after restart",
    );
    // Watch history lost as well (410 Gone): informers re-list and still converge.
    const relists = () => node.agent.informers().reduce((n, i) => n + i.stats.relists, 0);
    const relistsBefore = relists();
    // Held by the proxy, not only asked for: closeWatches ends only the watches it holds.
    await eventually(
      () => c.api.watchCount({ node: "node-1" }) >= node.agent.informers().length,
      "node-1's watches held",
    );
    await c.api.compact();
    c.api.closeWatches();
    await c.deletePod("before");
    await eventually(async () => (await c.data()).length === 1, "deletion seen after re-list");
    await eventually(
      () => node.activeKernel()?.entries.filter((e) => e.kind === "file").length === 1,
      "kernel map after re-list",
    );
    expect(relists()).toBeGreaterThan(relistsBefore);
  });

  it("reports a kernel that refuses the program, and keeps discovering", async () => {
    cluster = await Cluster.start(hive as HiveApi);
    const c = cluster;
    const node = await c.addNode("node-1", KERNEL_A, { kernelFails: true });
    await c.addPod("web", "node-1");
    await c.createPolicy("shadow", [{ path: "/etc/shadow" }]);
    await eventually(() => node.agent.loaderFailure(), "loader failure reported");
    expect(node.agent.loaderFailure()).toContain("KprobeUnsupported");
    await eventually(async () => (await c.data()).length === 1, "HiveData still written");
  });

  it("under the node-scope admission policy, leaves other nodes' HiveData to them and still finishes a policy deletion", async () => {
    cluster = await Cluster.start(hive as HiveApi);
    const c = cluster;
    const first = await c.addNode("node-1", KERNEL_A);
    await eventually(() => first.agent.pods() !== undefined, "node-1 holds the pods role");
    await c.addNode("node-2", KERNEL_B);
    await c.addPod("on-1", "node-1");
    await c.addPod("on-2", "node-2");
    await c.createPolicy("shadow", [{ path: "/etc/shadow" }]);
    const data = await eventually(async () => {
      const d = await c.data();
      return d.length === 2 ? d : undefined;
    }, "HiveData on both nodes");
    const other = data.find((d) => d.metadata.annotations?.node_name === "node-2");
    // Should node-1's agent (the pods role's holder) try to delete node-2's HiveData, the
    // ValidatingAdmissionPolicy refuses it: a refusal declared here, the deletion must finish anyway.
    c.expectRefusals({
      node: "node-1",
      verb: "delete",
      resource: "hivedata",
      name: other?.metadata.name ?? "",
    });
    await eventually(
      async () => (await c.getPolicy("shadow"))?.metadata.finalizers?.length === 1,
      "finalizer added",
    );
    await c.deletePolicy("shadow");
    // Not deleted at once: the finalizer waits for node-2 to remove its own HiveData.
    expect(await c.getPolicy("shadow")).toBeDefined();
    await eventually(
      async () => (await c.getPolicy("shadow")) === undefined,
      "policy deleted well before the finalizer's wait ends",
    );
    expect(await c.data()).toHaveLength(0);
    expect(
      c.api.countRequests({ verb: "delete", resource: "hivedata", node: "node-2" }),
    ).toBeGreaterThanOrEqual(1);
  });

  it("is ready only once its program is attached and the pods found at start are in its watch map", async () => {
    cluster = await Cluster.start(hive as HiveApi);
    const c = cluster;
    await c.ensureNode("node-1", KERNEL_A);
    await c.addPod("web", "node-1");
    await c.createPolicy("shadow", [{ path: "/etc/shadow", match: { namespace: "default" } }]);
    let load = () => {};
    const loads = new Promise<void>((resolve) => {
      load = resolve;
    });
    const node = await c.addNode("node-1", KERNEL_A, { kernelLoads: loads });
    const health = readinessOf(node);
    // The lists are in and the pod's HiveData written, but the program is still loading (it took
    // 41 s under emulation): a read now would go unseen, so the agent must not be Ready.
    await eventually(async () => (await c.data()).length === 1 && node.agent.ready(), "HiveData written");
    await new Promise((r) => setTimeout(r, 500));
    expect(await failing(health)).toEqual([
      expect.stringMatching(/^traps-armed: the kernel program is not loaded yet/),
    ]);
    load();
    await eventually(async () => (await health.readiness()).ok, "ready", 30_000);
    // Ready means watching: the pod's file is in the kernel's map at that moment.
    const [data] = await c.data();
    const kernel = node.activeKernel();
    expect(kernel?.entries.filter((e) => e.kind === "file").map((e) => String(e.key.ino))).toEqual([
      data?.spec["inode-no"],
    ]);
  });

  it("is ready without loading when another node sharing its kernel loads it, or when it has no loader role", async () => {
    cluster = await Cluster.start(hive as HiveApi);
    const c = cluster;
    const first = await c.addNode("node-1", KERNEL_A);
    await eventually(() => first.agent.loader() !== undefined, "node-1 loads the shared kernel");
    const second = await c.addNode("node-2", KERNEL_A);
    const third = await c.addNode("node-3", KERNEL_B, { loader: false });
    for (const node of [first, second, third]) {
      const health = readinessOf(node);
      await eventually(async () => (await health.readiness()).ok, `${node.name} ready`);
    }
    expect(second.agent.loader()).toBeUndefined();
  });
});
