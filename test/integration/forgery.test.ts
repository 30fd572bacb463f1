/**
 * What a tenant, a namespace owner with a wildcard role, or a compromised node would try
 * against the control plane, run through the API stand-in enforcing the RBAC and admission
 * policies the component renders: each attempt is refused with a reason.
 */
import {
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  RbacAuthorizationV1Api,
  setHeaderOptions,
} from "@kubernetes/client-node";
import { afterEach, describe, expect, it } from "vitest";
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
import { rejection, statusOf } from "../apiserver/testing.ts";
import { AGENT_NS, Cluster, eventually, POLICY_NS } from "./harness.ts";

const KERNEL_A = "aaaaaaaa-1111-4111-8111-111111111111";
const mergePatch = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);
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
    cluster = await Cluster.start();
    const c = cluster;
    const rbac = c.api.kubeConfig().makeApiClient(RbacAuthorizationV1Api);
    // A namespace owner whose role reaches HiveData (a wildcard, or `edit` aggregated cluster-wide).
    await c.admin.core.createNamespace({ body: { metadata: { name: "team-a" } } });
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
    const node2 = c.api.kubeConfig(c.installed.agent("node-2")).makeApiClient(CustomObjectsApi);
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
    expect(c.api.store.stored(GROUP, PLURAL_DATA)).toEqual([]);
  });

  it("lets an agent change nothing of a HivePolicy but its own finalizer", async () => {
    cluster = await Cluster.start();
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
    const node2 = c.api.kubeConfig(c.installed.agent("node-2")).makeApiClient(CustomObjectsApi);
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
    cluster = await Cluster.start();
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
    for (const [who, kc] of [
      ["a user allowed to create Events", tenant],
      ["node-2's agent", c.api.kubeConfig(c.installed.agent("node-2"))],
    ] as const) {
      const err = await rejection(
        kc.makeApiClient(CoreV1Api).createNamespacedEvent({
          namespace: POLICY_NS,
          body: report(who.replace(/\W/g, "").toLowerCase()),
        }),
      );
      expect(statusOf(err), who).toMatchObject({ code: 403 });
    }
    await c.api
      .kubeConfig(c.installed.agent("node-1"))
      .makeApiClient(CoreV1Api)
      .createNamespacedEvent({ namespace: POLICY_NS, body: report("own") });
  });
});
