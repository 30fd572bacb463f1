/**
 * No pass is hostage to one object: a HiveData whose delete the API server refuses forever (a 500
 * on every attempt) is retried on its own backoff while every other trap still arms and disarms.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Cluster, eventually, type HiveApi, startHiveApi } from "./harness.ts";

const KERNEL_A = "55555555-5555-4555-8555-555555555555";

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

describe("a HiveData delete that fails forever", () => {
  it("holds up no other trap: the rest arm and disarm, and the delete is retried with backoff", async () => {
    cluster = await Cluster.start(hive as HiveApi);
    const c = cluster;
    const node = await c.addNode("node-1", KERNEL_A);
    await c.addPod("web", "node-1", { files: { "etc/shadow": "s", "etc/passwd": "p" } });
    c.inject({ verb: "delete", resource: "hivedata", status: 500 });
    const armed = () =>
      (node.activeKernel()?.entries ?? [])
        .filter((e) => e.kind === "file")
        .map((e) => e.key.ino)
        .sort();
    const inoOf = async (path: string) =>
      (await c.data()).find((d) => d.metadata.annotations?.path === path)?.spec["inode-no"];

    await c.createPolicy("shadow", [{ path: "/etc/shadow" }]);
    await eventually(() => armed().length === 1, "shadow armed");
    const shadowIno = BigInt((await inoOf("/etc/shadow")) ?? 0);
    // Its HiveData can never be deleted now: discover's, the loader's and the pods role's deletes all fail.
    await c.deletePolicy("shadow");
    await eventually(() => armed().length === 0, "shadow disarmed although its HiveData stays");
    // Past the loader's orphan grace (300 ms here): from now on every pass tries that delete.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    await c.createPolicy("passwd", [{ path: "/etc/passwd" }]);
    await eventually(async () => {
      const ino = await inoOf("/etc/passwd");
      return ino !== undefined && armed().join() === String(ino);
    }, "passwd armed while the shadow delete keeps failing");
    expect(armed()).not.toContain(shadowIno);
    // Retried with backoff, not hammered: over 3 s, a handful of attempts per role.
    const before = c.api.countRequests({ verb: "delete", resource: "hivedata" });
    await new Promise((resolve) => setTimeout(resolve, 3000));
    const attempts = c.api.countRequests({ verb: "delete", resource: "hivedata" }) - before;
    expect(attempts).toBeGreaterThan(0);
    expect(attempts).toBeLessThan(20);
  });
});
