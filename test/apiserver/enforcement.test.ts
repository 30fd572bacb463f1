/**
 * The stand-in refuses what a real API server refuses: unknown tokens (401), requests no RBAC
 * binding grants (403, upstream's message), and writes a bound ValidatingAdmissionPolicy
 * denies (its reason and message), all from objects stored in it as a cluster would hold them.
 */
import { CoordinationV1Api, CoreV1Api, KubeConfig, RbacAuthorizationV1Api } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serviceAccountUser } from "./authn.ts";
import { type ApiServer, startApiServer } from "./server.ts";
import { rejection, statusOf } from "./testing.ts";

let api: ApiServer;
beforeAll(async () => {
  api = await startApiServer({ crds: [] });
  const rbac = api.kubeConfig().makeApiClient(RbacAuthorizationV1Api);
  await rbac.createNamespacedRole({
    namespace: "default",
    body: {
      metadata: { name: "reader" },
      rules: [
        { apiGroups: [""], resources: ["pods"], verbs: ["list"] },
        { apiGroups: [""], resources: ["secrets"], verbs: ["get", "list"], resourceNames: ["mine"] },
        { apiGroups: ["coordination.k8s.io"], resources: ["leases"], verbs: ["create"] },
      ],
    },
  });
  await rbac.createNamespacedRoleBinding({
    namespace: "default",
    body: {
      metadata: { name: "reader" },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "reader" },
      subjects: [{ kind: "ServiceAccount", name: "sa", namespace: "default" }],
    },
  });
  await api.store.create(
    api.resource("validatingadmissionpolicies", "admissionregistration.k8s.io"),
    undefined,
    {
      metadata: { name: "lease-holder" },
      spec: {
        failurePolicy: "Fail",
        matchConstraints: {
          resourceRules: [
            {
              apiGroups: ["coordination.k8s.io"],
              apiVersions: ["v1"],
              operations: ["CREATE"],
              resources: ["leases"],
            },
          ],
        },
        variables: [
          { name: "node", expression: "request.userInfo.extra['authentication.kubernetes.io/node-name'][0]" },
        ],
        validations: [
          {
            expression: "object.spec.holderIdentity == variables.node",
            messageExpression: "'held by ' + object.spec.holderIdentity + ', not ' + variables.node",
            reason: "Forbidden",
          },
        ],
      },
    },
  );
  await api.store.create(
    api.resource("validatingadmissionpolicybindings", "admissionregistration.k8s.io"),
    undefined,
    { metadata: { name: "lease-holder" }, spec: { policyName: "lease-holder", validationActions: ["Deny"] } },
  );
});
afterAll(async () => {
  await api.stop();
});

describe("the API stand-in enforces authentication, RBAC and admission", () => {
  it("answers 401 to a token it never issued", async () => {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: "c", server: api.url, skipTLSVerify: true }],
      users: [{ name: "u", token: "forged" }],
      contexts: [{ name: "c", cluster: "c", user: "u" }],
      currentContext: "c",
    });
    const err = await rejection(kc.makeApiClient(CoreV1Api).listNamespacedPod({ namespace: "default" }));
    expect((err as { code?: number }).code).toBe(401);
  });

  it("grants what a binding grants, to its subject only, and answers 403 as upstream writes it", async () => {
    const sa = api.kubeConfig(serviceAccountUser("default", "sa", "n1")).makeApiClient(CoreV1Api);
    await sa.listNamespacedPod({ namespace: "default" });
    await sa.readNamespacedSecret({ namespace: "default", name: "mine" }).catch((e) => {
      expect(statusOf(e).code).toBe(404); // allowed, and absent
    });
    // resourceNames reach a list only through its metadata.name field selector, as upstream.
    await sa.listNamespacedSecret({ namespace: "default", fieldSelector: "metadata.name=mine" });
    const unfiltered = await rejection(sa.listNamespacedSecret({ namespace: "default" }));
    expect(statusOf(unfiltered).code).toBe(403);
    const err = await rejection(sa.readNamespacedSecret({ namespace: "default", name: "theirs" }));
    expect(statusOf(err)).toEqual({
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message:
        'secrets "theirs" is forbidden: User "system:serviceaccount:default:sa" cannot get resource "secrets" in API group "" in the namespace "default"',
      reason: "Forbidden",
      details: { name: "theirs", kind: "secrets" },
      code: 403,
    });
    const elsewhere = await rejection(sa.listNamespacedPod({ namespace: "kube-system" }));
    expect(statusOf(elsewhere).code).toBe(403);
    const stranger = api.kubeConfig("someone").makeApiClient(CoreV1Api);
    expect(statusOf(await rejection(stranger.listNamespacedPod({ namespace: "default" }))).code).toBe(403);
  });

  it("evaluates bound admission policies with the request's user, refusing with the validation's reason", async () => {
    const lease = (holder: string) => ({
      metadata: { name: `l-${holder}` },
      spec: { holderIdentity: holder },
    });
    const sa = api.kubeConfig(serviceAccountUser("default", "sa", "n1")).makeApiClient(CoordinationV1Api);
    await sa.createNamespacedLease({ namespace: "default", body: lease("n1") });
    const err = await rejection(sa.createNamespacedLease({ namespace: "default", body: lease("n2") }));
    expect(statusOf(err)).toMatchObject({
      code: 403,
      reason: "Forbidden",
      message:
        "ValidatingAdmissionPolicy 'lease-holder' with binding 'lease-holder' denied request: held by n2, not n1",
    });
    expect(api.store.stored("coordination.k8s.io", "leases").map((l) => l.metadata.name)).toEqual(["l-n1"]);
    // An admin's token carries no node name: the expression fails, and failurePolicy Fail refuses.
    const admin = api.kubeConfig().makeApiClient(CoordinationV1Api);
    const failed = await rejection(admin.createNamespacedLease({ namespace: "default", body: lease("x") }));
    expect(statusOf(failed)).toMatchObject({ code: 422, reason: "Invalid" });
  });
});
