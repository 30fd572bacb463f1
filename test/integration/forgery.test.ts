/**
 * What a tenant, a namespace owner with a wildcard role, or a compromised node would try
 * against the control plane, run through a real kube-apiserver enforcing the RBAC and admission
 * policies the component renders (agents with real tokens bound to their Pods on their Nodes):
 * each attempt is refused with a reason.
 */
import {
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  RbacAuthorizationV1Api,
  setHeaderOptions,
} from "@kubernetes/client-node";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  GROUP,
  LABEL_KERNEL_ID,
  LABEL_MANAGED_BY,
  LABEL_NODE,
  MANAGED_BY,
  PLURAL_DATA,
  PLURAL_POLICY,
  POLICY_FINALIZER,
  VERSION,
} from "../../api/meta.ts";
import { rejection, statusOf } from "../cluster/testing.ts";
import { AGENT_NS, Cluster, eventually, type HiveApi, POLICY_NS, startHiveApi } from "./harness.ts";
import { armedOnNode1, holdLeaseAgainst, plantDataFor, takeLease } from "./node-attack.ts";

const KERNEL_A = "aaaaaaaa-1111-4111-8111-111111111111";
const KERNEL_B = "bbbbbbbb-2222-4222-8222-222222222222";
const mergePatch = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);
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

/** A HiveData as an attacker would forge it: another kernel, an inode of their choosing, their URL. */
const forged = (node: string) => ({
  apiVersion: `${GROUP}/${VERSION}`,
  kind: "HiveData",
  metadata: {
    name: "forged",
    labels: { [LABEL_NODE]: node, [LABEL_KERNEL_ID]: KERNEL_A, "trap-id": "0123456789abcdef" },
    annotations: { callback: "https://attacker.example/", path: "/etc/shadow" },
  },
  spec: { "inode-no": "2", "kernel-id": KERNEL_A, device: { major: 8, minor: 1 }, accesses: ["read"] },
});

describe("a control plane no tenant or node can forge", () => {
  it("refuses HiveData from anyone but the agent, even with a wildcard role, and from an agent for another node", async () => {
    cluster = await Cluster.start(hive as HiveApi);
    const c = cluster;
    const rbac = c.api.kubeConfig().makeApiClient(RbacAuthorizationV1Api);
    // A namespace owner whose role reaches HiveData (a wildcard, or `edit` aggregated cluster-wide).
    await c.createNamespace("team-a");
    await rbac.createClusterRole({
      body: {
        metadata: { name: "everything" },
        rules: [{ apiGroups: ["*"], resources: ["*"], verbs: ["*"] }],
      },
    });
    await rbac.createClusterRoleBinding({
      body: {
        metadata: { name: "mallory" },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "everything" },
        subjects: [{ kind: "User", name: "mallory", apiGroup: "rbac.authorization.k8s.io" }],
      },
    });
    const mallory = c.api.kubeConfig("mallory").makeApiClient(CustomObjectsApi);
    for (const namespace of ["team-a", AGENT_NS]) {
      const err = await rejection(
        mallory.createNamespacedCustomObject({
          group: GROUP,
          version: VERSION,
          namespace,
          plural: PLURAL_DATA,
          body: forged("node-1"),
        }),
      );
      expect(statusOf(err)).toMatchObject({ code: 403, reason: "Forbidden" });
      expect(statusOf(err).message).toContain("only the Hive agent");
    }
    // A compromised node-2 writing HiveData for node-1 (whose kernel it does not run).
    c.expectRefusals({ node: "node-2", verb: "create", resource: "hivedata" });
    const node2 = (await c.agentKubeConfig("node-2")).makeApiClient(CustomObjectsApi);
    const err = await rejection(
      node2.createNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: AGENT_NS,
        plural: PLURAL_DATA,
        body: forged("node-1"),
      }),
    );
    expect(statusOf(err).message).toContain("may only write HiveData labelled");
    expect(await c.data()).toEqual([]);
  });

  it("refuses the agent's ServiceAccount with a credential naming no node, saying why: a legacy token Secret, an unbound token", async () => {
    cluster = await Cluster.start(hive as HiveApi);
    const c = cluster;
    // Tokens of the agent's ServiceAccount not bound to a Pod: a long-lived token Secret (as
    // clusters before 1.24 made them, and as anyone who may create Secrets there can) carries no
    // node claim and no extra at all; a TokenRequest without a Pod carries only its credential id.
    const legacy = "hive-agent-legacy-token";
    await c.admin.core.createNamespacedSecret({
      namespace: AGENT_NS,
      body: {
        metadata: { name: legacy, annotations: { "kubernetes.io/service-account.name": "hive-agent" } },
        type: "kubernetes.io/service-account-token",
      },
    });
    const legacyToken = await eventually(async () => {
      const secret = await c.admin.core.readNamespacedSecret({ name: legacy, namespace: AGENT_NS });
      return secret.data?.token && Buffer.from(secret.data.token, "base64").toString("utf8");
    }, "the token controller fills the Secret");
    const unbound = await c.admin.core.createNamespacedServiceAccountToken({
      name: "hive-agent",
      namespace: AGENT_NS,
      body: { spec: { audiences: ["https://kubernetes.default.svc.cluster.local"], expirationSeconds: 600 } },
    });
    c.expectRefusals({ verb: "create", resource: "hivedata" });
    try {
      for (const [what, token] of [
        ["a legacy token Secret", legacyToken],
        ["an unbound token", unbound.status?.token ?? ""],
      ]) {
        const agent = c.api.cp.kubeConfig(token, c.api.url).makeApiClient(CustomObjectsApi);
        const err = await rejection(
          agent.createNamespacedCustomObject({
            group: GROUP,
            version: VERSION,
            namespace: AGENT_NS,
            plural: PLURAL_DATA,
            body: forged("node-1"),
          }),
        );
        expect(statusOf(err), what).toMatchObject({ code: 403, reason: "Forbidden" });
        expect(statusOf(err).message, what).toContain("carries no node name");
      }
    } finally {
      await c.admin.core.deleteNamespacedSecret({ name: legacy, namespace: AGENT_NS });
    }
    expect(await c.data()).toEqual([]);
  });

  it("lets an agent change nothing of a HivePolicy but its own finalizer", async () => {
    cluster = await Cluster.start(hive as HiveApi);
    const c = cluster;
    await c.addNode("node-1", KERNEL_A);
    await c.createPolicy("shadow", [{ path: "/etc/shadow" }]);
    await c.admin.custom.patchNamespacedCustomObject(
      {
        group: GROUP,
        version: VERSION,
        namespace: POLICY_NS,
        plural: PLURAL_POLICY,
        name: "shadow",
        body: { metadata: { finalizers: ["example.com/keep"] } },
      },
      mergePatch,
    );
    // The agent adds its own finalizer: allowed.
    await eventually(async () => {
      const p = (await c.admin.custom.getNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: POLICY_NS,
        plural: PLURAL_POLICY,
        name: "shadow",
      })) as { metadata: { finalizers?: string[] } };
      return p.metadata.finalizers?.includes(POLICY_FINALIZER);
    }, "the agent's finalizer");
    c.expectRefusals({ node: "node-2", verb: "patch", resource: "hivepolicies" });
    const node2 = (await c.agentKubeConfig("node-2")).makeApiClient(CustomObjectsApi);
    const patch = (metadata: Record<string, unknown>) =>
      rejection(
        node2.patchNamespacedCustomObject(
          {
            group: GROUP,
            version: VERSION,
            namespace: POLICY_NS,
            plural: PLURAL_POLICY,
            name: "shadow",
            body: { metadata },
          },
          mergePatch,
        ),
      );
    // An owner that does not exist: the garbage collector would delete the policy.
    const owner = await patch({
      ownerReferences: [
        { apiVersion: "v1", kind: "Pod", name: "gone", uid: "00000000-0000-4000-8000-000000000000" },
      ],
    });
    expect(statusOf(owner)).toMatchObject({ code: 403 });
    expect(statusOf(owner).message).toContain("only its own finalizer");
    const stripped = await patch({ finalizers: [POLICY_FINALIZER] });
    expect(statusOf(stripped)).toMatchObject({ code: 403 });
    const labelled = await patch({ labels: { quiet: "true" } });
    expect(statusOf(labelled)).toMatchObject({ code: 403 });
  });

  it("accepts a node's trap-error report only from that node's agent", async () => {
    cluster = await Cluster.start(hive as HiveApi);
    const c = cluster;
    const report = (node: string) => ({
      metadata: {
        name: `report-${node}`,
        labels: { [LABEL_MANAGED_BY]: MANAGED_BY, [LABEL_NODE]: "node-1" },
      },
      involvedObject: { kind: "HivePolicy", name: "shadow", namespace: POLICY_NS },
      reason: "FileNotFound",
      message: "forged",
    });
    const tenant = c.api.kubeConfig("mallory-events");
    const rbac = c.api.kubeConfig().makeApiClient(RbacAuthorizationV1Api);
    await rbac.createNamespacedRole({
      namespace: POLICY_NS,
      body: {
        metadata: { name: "events" },
        rules: [{ apiGroups: [""], resources: ["events"], verbs: ["create"] }],
      },
    });
    await rbac.createNamespacedRoleBinding({
      namespace: POLICY_NS,
      body: {
        metadata: { name: "events" },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "events" },
        subjects: [{ kind: "User", name: "mallory-events", apiGroup: "rbac.authorization.k8s.io" }],
      },
    });
    c.expectRefusals({ node: "node-2", verb: "create", resource: "events" });
    for (const [who, kc] of [
      ["a user allowed to create Events", tenant],
      ["node-2's agent", await c.agentKubeConfig("node-2")],
    ] as const) {
      const err = await rejection(
        kc.makeApiClient(CoreV1Api).createNamespacedEvent({
          namespace: POLICY_NS,
          body: report(who.replace(/\W/g, "").toLowerCase()),
        }),
      );
      expect(statusOf(err), who).toMatchObject({ code: 403 });
    }
    await (await c.agentKubeConfig("node-1"))
      .makeApiClient(CoreV1Api)
      .createNamespacedEvent({ namespace: POLICY_NS, body: report("own") });
  });
});

describe("elections a compromised node cannot win", () => {
  it("a node cannot hold another kernel's Lease: admission binds the holder to its token, the rightful loader keeps its role", async () => {
    cluster = await Cluster.start(hive as HiveApi);
    const c = cluster;
    const { node1 } = await armedOnNode1(c, KERNEL_A, KERNEL_B);
    const name = `hive-loader-${KERNEL_A}`;
    c.expectRefusals({ node: "node-2", verb: "update", resource: "leases", name });
    const attacker = (await c.agentKubeConfig("node-2")).makeApiClient(CoordinationV1Api);
    const takeAs = (holder: string) => takeLease(attacker, name, holder);
    // Posing as node-1's agent: refused. A 409 means node-1 renewed between the read and the write
    // (a real server checks the resourceVersion before admission too): the attacker reads again.
    let posing = await rejection(takeAs("node-1/hive-agent-node-1"));
    for (let i = 0; i < 20 && statusOf(posing).code === 409; i++)
      posing = await rejection(takeAs("node-1/hive-agent-node-1"));
    expect(statusOf(posing)).toMatchObject({ code: 403 });
    expect(statusOf(posing).message).toContain("may hold a Lease only as node-2/hive-agent-node-2");
    // As itself, renewing faster than any candidate: node-1's loader must not step down.
    await holdLeaseAgainst(c, "node-2", KERNEL_A, node1);
  });
});

describe("a compromised node and another kernel's watch map", () => {
  it("cannot arm a file in it: a HiveData naming a kernel its node does not run is never armed", async () => {
    cluster = await Cluster.start(hive as HiveApi);
    const { kernel } = await armedOnNode1(cluster, KERNEL_A, KERNEL_B);
    await plantDataFor(cluster, "node-2", KERNEL_A, kernel);
  });
});

describe("a test whose agent the server refused", () => {
  it("fails unless it declared that refusal, naming the request and the server's reason", async () => {
    cluster = await Cluster.start(hive as HiveApi);
    const c = cluster;
    const node2 = (await c.agentKubeConfig("node-2")).makeApiClient(CustomObjectsApi);
    await rejection(
      node2.createNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: AGENT_NS,
        plural: PLURAL_DATA,
        body: forged("node-1"),
      }),
    );
    // Not declared: stop() (the afterEach of every test) fails the test.
    cluster = undefined;
    const failure = await rejection(c.stop());
    expect(String(failure)).toContain("the API server refused 1 agent request(s)");
    expect(String(failure)).toContain("403 create hivedata hive-system/ as node node-2");
    expect(String(failure)).toContain("may only write HiveData labelled");
  });
});
