/**
 * Discover, loader and pods controllers end to end through the API server stand-in:
 * the user story, each match filter, pods and policies coming and going, status.
 */
import { statSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { trapId } from "../../api/ids.ts";
import { LABEL_KERNEL_ID, LABEL_NODE, LABEL_TRAP_ID, POLICY_FINALIZER } from "../../api/meta.ts";
import type { HiveTrap } from "../../api/policy.ts";
import { fileKeyFromStat } from "../../runtime/kernel/layout.ts";
import { Cluster, eventually, POLICY_NS } from "./harness.ts";

const KERNEL_A = "11111111-1111-4111-8111-111111111111";

let cluster: Cluster | undefined;
afterEach(async () => {
  await cluster?.stop();
  cluster = undefined;
});

const podsOf = async (c: Cluster, trap?: string) =>
  (await c.data())
    .filter((d) => !trap || d.metadata.labels?.[LABEL_TRAP_ID] === trap)
    .map((d) => `${d.metadata.annotations?.pod_name}/${d.metadata.annotations?.container_name}`)
    .sort();

describe("discover through the API server", () => {
  it("traps /etc/shadow in pods labelled security=high and in no other pod (the user story)", async () => {
    cluster = await Cluster.start();
    const node = await cluster.addNode("node-1", KERNEL_A);
    await cluster.addPod("high", "node-1", { labels: { security: "high" } });
    await cluster.addPod("low", "node-1", { labels: { security: "low" } });
    await cluster.addPod("none", "node-1");
    const trap: HiveTrap = { path: "/etc/shadow", match: { matchLabels: { security: "high" } } };
    await cluster.createPolicy("shadow", [trap]);
    const id = trapId({ namespace: POLICY_NS, name: "shadow" }, trap);

    const [data] = await eventually(async () => {
      const all = await cluster?.data();
      return all?.length === 1 ? all : undefined;
    }, "one HiveData");
    expect(data?.metadata.annotations?.pod_name).toBe("high");
    expect(data?.metadata.labels?.[LABEL_TRAP_ID]).toBe(id);
    expect(data?.metadata.labels?.[LABEL_KERNEL_ID]).toBe(KERNEL_A);
    expect(data?.metadata.labels?.[LABEL_NODE]).toBe("node-1");
    expect(data?.metadata.annotations?.path).toBe("/etc/shadow");
    expect(data?.metadata.annotations?.hive_policy_name).toBe("shadow");
    expect((data?.metadata.ownerReferences as { kind: string; name: string }[] | undefined)?.[0]).toMatchObject({
      kind: "Pod",
      name: "high",
    });
    // The inode and device are the file's in that container.
    const containerId = (data?.metadata.annotations?.container_id ?? "").replace("containerd://", "");
    const file = fileKeyFromStat(
      statSync(join(cluster.containers.rootOf(containerId), "etc/shadow"), { bigint: true }),
    );
    expect(BigInt(data?.spec["inode-no"] ?? 0)).toBe(file.ino);
    expect(data?.spec.device).toEqual({ major: file.major, minor: file.minor });

    // The loader put exactly that file (and its directory) into the kernel map.
    const kernel = await eventually(() => {
      const k = node.activeKernel();
      return k?.entries.some((e) => e.kind === "file") ? k : undefined;
    }, "kernel map synced");
    const files = kernel.entries.filter((e) => e.kind === "file");
    expect(files.map((e) => e.key)).toEqual([file]);
    expect(kernel.entries.filter((e) => e.kind === "parent")).toHaveLength(1);

    // An access event reaches the alert side with the HiveData it matched.
    kernel.emit({ slot: files[0]?.slot ?? -1, kind: "file", key: file });
    expect(node.accesses.at(-1)?.matched.map((d) => d.metadata.annotations?.pod_name)).toEqual(["high"]);

    // kubectl get hivepolicies shows it works.
    const policy = await eventually(async () => {
      const p = await cluster?.getPolicy("shadow");
      return p?.status?.traps?.[0]?.inodesFound === 1 ? p : undefined;
    }, "policy status");
    expect(policy.metadata.finalizers).toContain(POLICY_FINALIZER);
    expect(policy.status?.conditions?.[0]).toMatchObject({
      type: "Ready",
      status: "True",
      reason: "TrapsWatched",
    });
    expect(policy.status?.traps?.[0]).toMatchObject({ trapId: id, matchedContainers: 1, inodesFound: 1 });
  });
});
