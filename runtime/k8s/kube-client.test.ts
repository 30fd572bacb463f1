/** Client configuration and connection reuse, against a real kube-apiserver behind the fault proxy. */
import { AuthenticationV1Api, CoreV1Api, RbacAuthorizationV1Api } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isHiveError } from "../../api/errors.ts";
import { type RealApi, startRealApi } from "../../test/cluster/real-api.ts";
import { createKubeClients, loadKubeConfig } from "./kube-client.ts";

let api: RealApi;
/** The cluster CA's certificate file: what verifies the server an https URL names. */
let caFile: string;
/** A real ServiceAccount token (TokenRequest) for default/node-7, allowed to list namespaces. */
let token: string;

beforeAll(async () => {
  api = await startRealApi({ controllerManager: false });
  caFile = api.cp.pki.files.caCert;
  const admin = api.kubeConfig();
  const core = admin.makeApiClient(CoreV1Api);
  await core.createNamespacedServiceAccount({ namespace: "default", body: { metadata: { name: "node-7" } } });
  const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
  await rbac.createClusterRole({
    body: {
      metadata: { name: "list-namespaces" },
      rules: [{ apiGroups: [""], resources: ["namespaces"], verbs: ["list"] }],
    },
  });
  await rbac.createClusterRoleBinding({
    body: {
      metadata: { name: "node-7-lists-namespaces" },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "list-namespaces" },
      subjects: [{ kind: "ServiceAccount", namespace: "default", name: "node-7" }],
    },
  });
  const issued = await core.createNamespacedServiceAccountToken({
    namespace: "default",
    name: "node-7",
    body: { spec: { audiences: ["https://kubernetes.default.svc.cluster.local"], expirationSeconds: 3600 } },
  });
  token = issued.status?.token ?? "";
});
afterAll(async () => {
  await api?.stop();
});

describe("kube-client", () => {
  it("connects by URL and token; the token is the user the server sees", async () => {
    const clients = createKubeClients({ url: api.url, token, caFile });
    await clients.core.listNamespace();
    const user = "system:serviceaccount:default:node-7";
    expect(api.requests.at(-1)).toMatchObject({ verb: "list", resource: "namespaces", user, code: 200 });
    const review = await clients.kubeConfig.makeApiClient(AuthenticationV1Api).createSelfSubjectReview({
      body: { apiVersion: "authentication.k8s.io/v1", kind: "SelfSubjectReview" },
    });
    expect(review.status?.userInfo?.username).toBe(user);
  });

  it("verifies the server an https URL names: a certificate its CA did not sign is refused", async () => {
    const { core } = createKubeClients({ url: api.url, token });
    const err = await core.listNamespace().catch((e: unknown) => e);
    expect(String((err as { cause?: unknown }).cause ?? err)).toMatch(/certificate/i);
  });

  it("reuses connections across requests (client-node alone opens one per request)", async () => {
    const count = async (core: CoreV1Api) => {
      const before = api.connectionCount();
      for (let i = 0; i < 10; i++) await core.listNamespace();
      return api.connectionCount() - before;
    };
    const plain = createKubeClients({ url: api.url, token, caFile, shareConnections: false }).core;
    const shared = createKubeClients({ url: api.url, token, caFile }).core;
    expect(await count(plain)).toBe(10);
    expect(await count(shared)).toBeLessThanOrEqual(3);
  });

  it("reports a kubeconfig that cannot be loaded as ConfigInvalid", () => {
    let err: unknown;
    try {
      loadKubeConfig({ kubeconfigPath: "/nonexistent/kubeconfig" });
    } catch (e) {
      err = e;
    }
    expect(isHiveError(err, "ConfigInvalid")).toBe(true);
  });
});
