/**
 * A graceful shutdown delivers the last events: the kernel watcher's close drains the ring
 * buffer, and what it drains must still be routed to its pod and trap, so the loader's
 * controller may stop only after the kernel has closed.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Cluster, eventually, type HiveApi, startHiveApi } from "./harness.ts";

const KERNEL = "44444444-4444-4444-8444-444444444444";
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

describe("agent shutdown", () => {
  it("routes the events drained while the kernel closes to their pod and trap", {
    timeout: 60_000,
  }, async () => {
    cluster = await Cluster.start(hive as HiveApi);
    const c = cluster;
    const node = await c.addNode("node-1", KERNEL);
    await c.addPod("web", "node-1", { files: { "etc/shadow": "root:*:1::::::\n" } });
    await c.createPolicy("shadow", [{ path: "/etc/shadow" }]);
    await eventually(
      () => node.activeKernel()?.entries.some((e) => e.kind === "file") ?? false,
      "trap armed",
    );
    const kernel = node.activeKernel();
    const slot = kernel?.entries.find((e) => e.kind === "file")?.slot ?? -1;
    if (kernel) kernel.onClose = (k) => k.emit({ slot, kind: "file" });

    await node.agent.stop();
    expect(node.accesses.map((a) => a.event.slot)).toEqual([slot]);
    expect(node.accesses[0]?.matched.map((d) => d.metadata.annotations?.pod_name)).toEqual(["web"]);
  });
});
