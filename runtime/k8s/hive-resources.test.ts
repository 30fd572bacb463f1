/** Typed HivePolicy / HiveData helpers against the API stand-in (Hive's real CRDs installed). */
import { CoreV1Api } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { HiveData } from "../../api/data.ts";
import { LABEL_KERNEL_ID, POLICY_FINALIZER } from "../../api/meta.ts";
import { type ApiServer, startApiServer } from "../../test/apiserver/server.ts";
import { isHiveError } from "../errors.ts";
import { HiveResources } from "./hive-resources.ts";
import { createKubeClients } from "./kube-client.ts";

let api: ApiServer;
let hive: HiveResources;
const NS = "hive-system";
const KERNEL = "0b5e2c8a-9a4e-4a8e-9d86-3c55d0c1d6a1";

function data(name: string, inode: number, kernel = "k1"): HiveData {
  return {
    apiVersion: "hive-operator.com/v1alpha1",
    kind: "HiveData",
    metadata: { name, namespace: NS, labels: { [LABEL_KERNEL_ID]: kernel } },
    spec: {
      "inode-no": inode,
      "kernel-id": KERNEL,
      device: { major: 8, minor: 1 },
      accesses: ["read", "write"],
    },
  };
}

beforeAll(async () => {
  api = await startApiServer();
  const clients = createKubeClients({ url: api.url, token: "agent" });
  hive = new HiveResources(clients.custom, { pageSize: 2 });
  await api
    .kubeConfig()
    .makeApiClient(CoreV1Api)
    .createNamespace({ body: { metadata: { name: NS } } });
});
afterAll(async () => {
  await api.stop();
});

describe("HiveResources", () => {
  it("applyData creates, then writes only when the content differs", async () => {
    const first = await hive.applyData(data("d1", 100));
    expect(first.changed).toBe(true);
    api.resetRequests();
    const again = await hive.applyData(data("d1", 100));
    expect(again.changed).toBe(false);
    expect(api.countRequests({ verb: "update" })).toBe(0);
    const moved = await hive.applyData(data("d1", 101));
    expect(moved.changed).toBe(true);
    expect(moved.data.spec["inode-no"]).toBe(101);
    expect((await hive.getData(NS, "d1"))?.spec["inode-no"]).toBe(101);
  });

  it("lists HiveData by label selector across pages", async () => {
    for (let i = 0; i < 5; i++) await hive.applyData(data(`page-${i}`, 200 + i, "k-pages"));
    await hive.applyData(data("page-other", 300, "k-other"));
    api.resetRequests();
    const listed = await hive.listData(NS, `${LABEL_KERNEL_ID}=k-pages`);
    expect(listed.map((d) => d.metadata.name).sort()).toEqual([
      "page-0",
      "page-1",
      "page-2",
      "page-3",
      "page-4",
    ]);
    expect(api.countRequests({ verb: "list", resource: "hivedata" })).toBe(3);
  });

  it("deletes one HiveData (false when already gone) and collections by selector", async () => {
    await hive.applyData(data("gone", 1));
    expect(await hive.deleteData(NS, "gone")).toBe(true);
    expect(await hive.deleteData(NS, "gone")).toBe(false);
    await hive.applyData(data("bulk-1", 2, "k-bulk"));
    await hive.applyData(data("bulk-2", 3, "k-bulk"));
    await hive.deleteDataMatching(NS, `${LABEL_KERNEL_ID}=k-bulk`);
    expect(await hive.listData(NS, `${LABEL_KERNEL_ID}=k-bulk`)).toEqual([]);
  });

  it("adds and removes the policy finalizer and writes status through the subresource", async () => {
    const custom = createKubeClients({ url: api.url }).custom;
    await custom.createNamespacedCustomObject({
      group: "hive-operator.com",
      version: "v1alpha1",
      plural: "hivepolicies",
      namespace: NS,
      body: {
        apiVersion: "hive-operator.com/v1alpha1",
        kind: "HivePolicy",
        metadata: { name: "pol" },
        spec: { traps: [{ path: "/etc/shadow" }] },
      },
    });
    const withFinalizer = await hive.setPolicyFinalizer(NS, "pol", POLICY_FINALIZER, true);
    expect(withFinalizer?.metadata.finalizers).toEqual([POLICY_FINALIZER]);
    const status = await hive.patchPolicyStatus(NS, "pol", {
      observedGeneration: 1,
      trapCount: 1,
      matchedContainers: 0,
    });
    expect(status?.status?.trapCount).toBe(1);
    expect((await hive.listPolicies(NS)).map((p) => p.metadata.name)).toEqual(["pol"]);
    const without = await hive.setPolicyFinalizer(NS, "pol", POLICY_FINALIZER, false);
    expect(without?.metadata.finalizers ?? []).toEqual([]);
    expect(await hive.patchPolicyStatus(NS, "missing", { trapCount: 0 })).toBeUndefined();
  });

  it("reports API failures as HiveError ApiRequestFailed with the object and HTTP code", async () => {
    const heal = api.inject({ verb: "list", resource: "hivedata", status: 403 });
    let err: unknown;
    try {
      await hive.listData(NS);
    } catch (e) {
      err = e;
    }
    heal();
    expect(isHiveError(err, "ApiRequestFailed")).toBe(true);
    expect((err as { details: { status: number } }).details.status).toBe(403);
    expect((err as { hint: string }).hint).toContain("RBAC");
  });
});
