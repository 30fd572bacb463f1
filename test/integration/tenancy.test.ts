/**
 * Tenancy in the agent: a HivePolicy outside the platform namespace reaches only the pods of
 * its own namespace, whatever its match says; the platform's policies reach every namespace.
 * The admission policies are not installed here, so this is the agent's own check (a policy admitted
 * before the admission policy existed is held to it too).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { trapId } from "../../api/ids.ts";
import { LABEL_TRAP_ID } from "../../api/meta.ts";
import type { HiveTrap } from "../../api/policy.ts";
import { Cluster, eventually, type HiveApi, POLICY_NS, startHiveApi } from "./harness.ts";

const KERNEL_A = "33333333-3333-4333-8333-333333333333";
let hive: HiveApi | undefined;
beforeAll(async () => {
  hive = await startHiveApi({
    admission: {
      off: "the agent's own check is tested: the admission policy would refuse the tenant's policy",
    },
  });
});
afterAll(async () => {
  await hive?.stop();
});
let cluster: Cluster | undefined;
afterEach(async () => {
  await cluster?.stop();
  cluster = undefined;
});

describe("tenant policies", () => {
  it("reach only their own namespace's pods; the platform's reach all", async () => {
    cluster = await Cluster.start(hive as HiveApi);
    const c = cluster;
    await c.addNode("node-1", KERNEL_A);
    for (const ns of ["team-a", "team-b"]) // kube-system exists from the start, as in a cluster
      await c.createNamespace(ns);
    const files = {
      "etc/shadow": "root:*:1::::::\n",
      "etc/passwd": "root:x:0:0::/root:/bin/sh\n",
      "etc/hostname": "h\n",
    };
    await c.addPod("web", "node-1", { namespace: "team-a", files });
    await c.addPod("api", "node-1", { namespace: "team-b", files });
    await c.addPod("dns", "node-1", { namespace: "kube-system", files });

    const everywhere: HiveTrap = { path: "/etc/shadow" };
    const intoKubeSystem: HiveTrap = { path: "/etc/hostname", match: { namespace: "kube-system" } };
    await c.createPolicy("team-traps", [everywhere, intoKubeSystem], "team-a");
    const platform: HiveTrap = { path: "/etc/passwd" };
    await c.createPolicy("platform", [platform]);

    const podsOf = async (id: string) =>
      (await c.data())
        .filter((d) => d.metadata.labels?.[LABEL_TRAP_ID] === id)
        .map((d) => `${d.metadata.annotations?.namespace}/${d.metadata.annotations?.pod_name}`)
        .sort();
    const platformId = trapId({ namespace: POLICY_NS, name: "platform" }, platform);
    await eventually(async () => (await podsOf(platformId)).length === 3, "platform trap in every namespace");
    expect(await podsOf(platformId)).toEqual(["kube-system/dns", "team-a/web", "team-b/api"]);
    const tenant = { namespace: "team-a", name: "team-traps" };
    expect(await podsOf(trapId(tenant, everywhere))).toEqual(["team-a/web"]);
    expect(await podsOf(trapId(tenant, intoKubeSystem))).toEqual([]);
  });

  it("a tenant's denying trap has the kernel refuse only its own pods' files; another tenant's pod is not even watched", async () => {
    cluster = await Cluster.start(hive as HiveApi);
    const c = cluster;
    const node = await c.addNode("node-1", KERNEL_A);
    for (const ns of ["team-a", "team-b"]) await c.createNamespace(ns);
    const files = { "etc/shadow": "root:*:1::::::\n" };
    await c.addPod("web", "node-1", { namespace: "team-a", files });
    await c.addPod("api", "node-1", { namespace: "team-b", files });
    // The tenant asks to deny every pod's file, the other tenant's included.
    await c.createPolicy("deny-all", [{ path: "/etc/shadow", action: "deny" }], "team-a");
    const [own] = await eventually(async () => {
      const d = await c.data();
      return d.length === 1 ? d : undefined;
    }, "the tenant's own pod's HiveData");
    expect(own?.metadata.annotations?.namespace).toBe("team-a");
    const denied = await eventually(() => {
      const files = node.activeKernel()?.entries.filter((e) => e.kind === "file") ?? [];
      return files.length > 0 ? files : undefined;
    }, "the kernel map synced");
    expect(denied.map((e) => [String(e.key.ino), e.deny])).toEqual([[String(own?.spec["inode-no"]), "deny"]]);
  });
});
