/**
 * A tenant's container-name pattern is bounded work: `(a+)+` is catastrophic for a
 * backtracking engine (about 72 ms at 24 characters, doubling with each one more), and discover
 * matches it against every container of the tenant's pods on the agent's main thread. The agent
 * must stay responsive: no event-loop stall, Leases renewed, other traps alerted at once.
 */
import { monitorEventLoopDelay } from "node:perf_hooks";
import { CoordinationV1Api } from "@kubernetes/client-node";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { HiveTrap } from "../../api/policy.ts";
import { LOADER_LEASE_PREFIX } from "../../runtime/agent/loader-election.ts";
import { PODS_LEASE } from "../../runtime/agent/node-agent.ts";
import { AGENT_NS, Cluster, eventually, type HiveApi, startHiveApi } from "./harness.ts";

const KERNEL_A = "44444444-4444-4444-8444-444444444444";
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

describe("a tenant's container-name pattern", () => {
  it("cannot stall the agent: it stays ready, renews its Leases and alerts other traps within a second", async () => {
    cluster = await Cluster.start(hive as HiveApi);
    const c = cluster;
    const node = await c.addNode("node-1", KERNEL_A);
    await c.createNamespace("team-a");
    await c.addPod("web", "node-1", { files: { "etc/shadow": "x" } });
    await c.createPolicy("platform", [{ path: "/etc/shadow" }]);
    const kernel = await eventually(() => {
      const k = node.activeKernel();
      return k?.entries.some((e) => e.kind === "file") ? k : undefined;
    }, "the platform trap armed");

    const delay = monitorEventLoopDelay({ resolution: 10 });
    delay.enable();
    // 60 characters: centuries per match for a backtracking engine, on every discover pass.
    const hostile: HiveTrap = { path: "/etc/passwd", match: { "container-name": "(a+)+" } };
    const long = `${"a".repeat(59)}b`;
    await c.addPod(long, "node-1", { namespace: "team-a", containers: [long] });
    await c.createPolicy("tenant", [hostile], "team-a");
    const coordination = c.api.kubeConfig().makeApiClient(CoordinationV1Api);
    const renewTime = async (name: string) =>
      String((await coordination.readNamespacedLease({ name, namespace: AGENT_NS })).spec?.renewTime);
    const leases = [PODS_LEASE, `${LOADER_LEASE_PREFIX}${KERNEL_A}`];
    const before = await Promise.all(leases.map(renewTime));
    // Discover matches the tenant's pattern in the passes the new pod and policy trigger.
    await eventually(
      async () => (await c.getPolicy("tenant", "team-a"))?.status?.traps?.length === 1,
      "tenant trap seen",
    );
    await new Promise((resolve) => setTimeout(resolve, 500));

    const file = kernel.entries.find((e) => e.kind === "file");
    const t0 = performance.now();
    kernel.emit({ slot: file?.slot ?? -1, kind: "file" });
    await eventually(() => node.accesses.length > 0, "the platform trap's alert", 1000);
    expect(performance.now() - t0).toBeLessThan(1000);
    for (const [i, name] of leases.entries())
      await eventually(async () => (await renewTime(name)) !== before[i], `${name} renewed`);
    expect(node.agent.ready()).toBe(true);
    delay.disable();
    // The longest the event loop was blocked while the pattern was matched (ns → ms).
    expect(delay.max / 1e6).toBeLessThan(500);
  });
});
