import { AuthenticationV1Api, CoreV1Api, CustomObjectsApi } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { API_VERSION, GROUP, PLURAL_POLICY, VERSION } from "../../api/meta.ts";
import { NODE_NAME_EXTRA } from "./fault-proxy.ts";
import { type Installed, installHive } from "./install.ts";
import { type RealApi, startRealApi } from "./real-api.ts";

/** What every other test relies on: the real server, its audit log, its tokens, and the proxy's faults. */
describe("a real control plane behind the fault proxy", () => {
  let api: RealApi;
  let hive: Installed;
  beforeAll(async () => {
    api = await startRealApi({ watchCache: false });
    hive = installHive(api.cp, { image: "hive:test", namespace: "hive-system" });
  }, 180_000);
  afterAll(async () => {
    await api?.stop();
  });

  it("serves Hive's rendered CRDs, and a user with no binding is refused by RBAC, as its audit log records", async () => {
    const custom = api.kubeConfig("stranger").makeApiClient(CustomObjectsApi);
    const err = await custom
      .listNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: "default",
        plural: PLURAL_POLICY,
      })
      .catch((e: unknown) => e);
    expect((err as { code?: number }).code).toBe(403);
    const refused = api.cp.audit.refusals({ user: "stranger", resource: PLURAL_POLICY });
    expect(refused).toHaveLength(1);
    expect(refused[0]?.annotations?.["authorization.k8s.io/decision"]).toBe("forbid");
    const admin = api.kubeConfig().makeApiClient(CustomObjectsApi);
    const list = (await admin.listNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: "default",
      plural: PLURAL_POLICY,
    })) as { apiVersion: string };
    expect(list.apiVersion).toBe(API_VERSION);
  });

  it("mints agent tokens bound to a Pod on a Node: the server itself names the node", async () => {
    const token = await hive.agentToken("node-a");
    const kc = api.kubeConfig();
    kc.getCurrentUser();
    const review = await api.cp
      .kubeConfig(token)
      .makeApiClient(AuthenticationV1Api)
      .createSelfSubjectReview({
        body: { apiVersion: "authentication.k8s.io/v1", kind: "SelfSubjectReview" },
      });
    expect(review.status?.userInfo?.username).toBe(hive.agentUser);
    expect(review.status?.userInfo?.extra?.[NODE_NAME_EXTRA]).toEqual(["node-a"]);
  });

  it("cuts connections for an outage and answers again on the same address", async () => {
    const core = api.kubeConfig().makeApiClient(CoreV1Api);
    await core.listNamespace();
    const outage = api.restart({ downtimeMs: 400 });
    await new Promise((r) => setTimeout(r, 100));
    const during = await core.listNamespace().catch((e: unknown) => e);
    expect(String(during)).toMatch(/ECONNREFUSED|fetch failed|socket/i);
    await outage;
    expect((await core.listNamespace()).items.length).toBeGreaterThan(0);
  });

  it("injects an answer the server never gave, then lets requests through again", async () => {
    const core = api.kubeConfig("admin").makeApiClient(CoreV1Api);
    api.inject({ verb: "list", resource: "namespaces", status: 503, times: 1 });
    const failed = await core.listNamespace().catch((e: unknown) => e);
    expect((failed as { code?: number }).code).toBe(503);
    expect((await core.listNamespace()).items.length).toBeGreaterThan(0);
    expect(api.requests.filter((r) => r.injected).length).toBe(1);
  });

  it("answers 410 Expired for a list continued after etcd compacted its snapshot", async () => {
    const core = api.kubeConfig().makeApiClient(CoreV1Api);
    for (let i = 0; i < 3; i++)
      await core.createNamespacedConfigMap({ namespace: "default", body: { metadata: { name: `c${i}` } } });
    const page = await core.listNamespacedConfigMap({ namespace: "default", limit: 1 });
    expect(page.metadata?._continue).toBeTruthy();
    for (let i = 3; i < 5; i++)
      await core.createNamespacedConfigMap({ namespace: "default", body: { metadata: { name: `c${i}` } } });
    await api.compact();
    const err = await core
      .listNamespacedConfigMap({ namespace: "default", limit: 1, _continue: page.metadata?._continue })
      .catch((e: unknown) => e);
    expect((err as { code?: number }).code).toBe(410);
  });
});
