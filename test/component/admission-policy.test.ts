/**
 * The agent's ValidatingAdmissionPolicy as a real kube-apiserver enforces it, installed from the
 * rendered manifests: agents authenticate with real pod-bound ServiceAccount tokens (TokenRequest,
 * bound to a Pod on a Node, so the server itself names the node in the token's claims), and make
 * the requests a compromised or a well-behaved agent would send. The server's own admission
 * decides; its denial names the policy and says why.
 */
import {
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  PatchStrategy,
  RbacAuthorizationV1Api,
  setHeaderOptions,
} from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ANNOTATION_RESOLVE_REQUEST,
  GROUP,
  LABEL_NODE,
  PLURAL_DATA,
  PLURAL_POLICY,
  POLICY_FINALIZER,
  VERSION,
} from "../../api/index.ts";
import { ADMISSION_POLICY_NAME, AGENT_ONLY_POLICY_NAME } from "../../component/builders/admission.ts";
import { policyDenial, untilEnforced } from "../cluster/admission.ts";
import { boundToken, type Installed, installHive } from "../cluster/install.ts";
import { type RealApi, startRealApi } from "../cluster/real-api.ts";
import { statusOf } from "../cluster/testing.ts";
import { MINIMAL } from "./configs.ts";

const NS = "hive-system";
const mergePatch = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

type Meta = {
  name: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string | null>;
  ownerReferences?: unknown[];
  finalizers?: string[];
};

/** One identity's HiveData and HivePolicy requests; each answers "allowed" or why it was refused. */
class Client {
  private readonly custom: CustomObjectsApi;
  constructor(kc: KubeConfig) {
    this.custom = kc.makeApiClient(CustomObjectsApi);
  }
  private static at(plural: string) {
    return { group: GROUP, version: VERSION, namespace: NS, plural };
  }
  createData(metadata: Meta, spec: unknown = SPEC) {
    return answer(
      this.custom.createNamespacedCustomObject({
        ...Client.at(PLURAL_DATA),
        body: { apiVersion: `${GROUP}/${VERSION}`, kind: "HiveData", metadata, spec },
      }),
    );
  }
  /** A merge patch, as the loader sends its re-resolve request. */
  patchData(name: string, patch: { metadata?: Partial<Meta>; spec?: unknown }) {
    return answer(
      this.custom.patchNamespacedCustomObject({ ...Client.at(PLURAL_DATA), name, body: patch }, mergePatch),
    );
  }
  /** A replace of the object as it is stored, with `change` applied. */
  async replaceData(name: string, change: (o: { metadata: Meta; spec: Record<string, unknown> }) => void) {
    const current = (await admin.custom.getNamespacedCustomObject({ ...Client.at(PLURAL_DATA), name })) as {
      metadata: Meta;
      spec: Record<string, unknown>;
    };
    change(current);
    return answer(
      this.custom.replaceNamespacedCustomObject({ ...Client.at(PLURAL_DATA), name, body: current }),
    );
  }
  deleteData(name: string) {
    return answer(this.custom.deleteNamespacedCustomObject({ ...Client.at(PLURAL_DATA), name }));
  }
  patchPolicy(name: string, patch: unknown) {
    return answer(
      this.custom.patchNamespacedCustomObject({ ...Client.at(PLURAL_POLICY), name, body: patch }, mergePatch),
    );
  }
}

/** "allowed", or `<policy>: <message>` for a ValidatingAdmissionPolicy's denial, or `<code>: <message>`. */
async function answer(request: Promise<unknown>): Promise<string> {
  try {
    await request;
    return "allowed";
  } catch (err) {
    const status = statusOf(err);
    const denied = policyDenial(status.message ?? "");
    return denied ? `${denied.policy}: ${denied.message}` : `${status.code}: ${status.message}`;
  }
}

const SPEC = {
  "inode-no": "42",
  "kernel-id": "5b8e2c1a-0000-4000-8000-000000000001",
  device: { major: 0, minor: 50 },
  accesses: ["read"],
};
const labelled = (name: string, node?: string): Meta => ({
  name,
  ...(node === undefined ? {} : { labels: { [LABEL_NODE]: node, "trap-id": "abc" } }),
});

const MAY_ONLY_WRITE_OWN = `${ADMISSION_POLICY_NAME}: the Hive agent of node node-a may only write HiveData labelled ${LABEL_NODE}=node-a`;
const NOT_OTHERS =
  `${ADMISSION_POLICY_NAME}: the Hive agent of node node-a may not change or delete HiveData of node node-b ` +
  `(it may only set ${ANNOTATION_RESOLVE_REQUEST} to a timestamp, changing nothing else)`;

let api: RealApi;
let hive: Installed;
let admin: { custom: CustomObjectsApi; client: Client };
let agentA: Client;
let agentB: Client;

beforeAll(async () => {
  // No controller manager: nothing garbage-collects HiveData whose owner Pod does not exist.
  api = await startRealApi({ controllerManager: false });
  hive = installHive(api.cp, MINIMAL);
  expect(hive.namespace).toBe(NS);
  const kc = api.cp.adminKubeConfig();
  admin = { custom: kc.makeApiClient(CustomObjectsApi), client: new Client(kc) };
  agentA = new Client(api.cp.kubeConfig(await hive.agentToken("node-a")));
  agentB = new Client(api.cp.kubeConfig(await hive.agentToken("node-b")));
  // The policies apply once the server has loaded them: until then every write would be allowed.
  const custom = api.cp.kubeConfig(await hive.agentToken("node-a")).makeApiClient(CustomObjectsApi);
  const probe = (labels: Record<string, string>) => () =>
    custom.createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: NS,
      plural: PLURAL_DATA,
      dryRun: "All",
      body: {
        apiVersion: `${GROUP}/${VERSION}`,
        kind: "HiveData",
        metadata: { name: "probe", labels },
        spec: SPEC,
      },
    });
  await untilEnforced(ADMISSION_POLICY_NAME, probe({ [LABEL_NODE]: "node-b" }));
  await untilEnforced(AGENT_ONLY_POLICY_NAME, () =>
    admin.custom.createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: NS,
      plural: PLURAL_DATA,
      dryRun: "All",
      body: { apiVersion: `${GROUP}/${VERSION}`, kind: "HiveData", metadata: { name: "probe" }, spec: SPEC },
    }),
  );
});
afterAll(async () => {
  await api?.stop();
});

describe("the agent admission policy", () => {
  it("lets an agent create, update and delete the HiveData of its own node", async () => {
    expect(await agentA.createData(labelled("own-1", "node-a"))).toBe("allowed");
    expect(
      await agentA.replaceData("own-1", (o) => {
        o.spec["inode-no"] = "43";
      }),
    ).toBe("allowed");
    expect(await agentA.deleteData("own-1")).toBe("allowed");
  });

  it("denies HiveData for another node, or with no node label", async () => {
    expect(await agentA.createData(labelled("for-b", "node-b"))).toBe(MAY_ONLY_WRITE_OWN);
    expect(await agentA.createData(labelled("unlabelled"))).toBe(MAY_ONLY_WRITE_OWN);
  });

  it("denies taking over, rewriting or deleting another node's HiveData", async () => {
    expect(await agentB.createData(labelled("b-1", "node-b"))).toBe("allowed");
    expect(
      await agentA.replaceData("b-1", (o) => {
        o.metadata.labels = { ...o.metadata.labels, [LABEL_NODE]: "node-a" };
      }),
    ).toBe(NOT_OTHERS);
    expect(
      await agentA.replaceData("b-1", (o) => {
        o.spec["inode-no"] = "7";
      }),
    ).toBe(NOT_OTHERS);
    expect(await agentA.deleteData("b-1")).toBe(NOT_OTHERS);
  });

  it("fails closed when the agent's token names no node", async () => {
    // A token of the agent's ServiceAccount bound to no Pod: the server puts no node in it.
    const core = api.cp.adminKubeConfig().makeApiClient(CoreV1Api);
    const res = await core.createNamespacedServiceAccountToken({
      name: "hive-agent",
      namespace: NS,
      body: {
        spec: { audiences: ["https://kubernetes.default.svc.cluster.local"], expirationSeconds: 3600 },
      },
    });
    const unbound = new Client(api.cp.kubeConfig(res.status?.token ?? ""));
    expect(await unbound.createData(labelled("no-claim", "node-a"))).toMatch(
      new RegExp(`^${ADMISSION_POLICY_NAME}: the hive-agent token carries no node name`),
    );
  });

  it("lets the agent add its finalizer to a HivePolicy but not change the traps", async () => {
    await admin.custom.createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: NS,
      plural: PLURAL_POLICY,
      body: {
        apiVersion: `${GROUP}/${VERSION}`,
        kind: "HivePolicy",
        metadata: { name: "p" },
        spec: { traps: [{ path: "/etc/shadow" }] },
      },
    });
    expect(await agentA.patchPolicy("p", { metadata: { finalizers: [POLICY_FINALIZER] } })).toBe("allowed");
    expect(await agentA.patchPolicy("p", { spec: { traps: [{ path: "/tmp/x" }] } })).toMatch(
      new RegExp(
        `^${ADMISSION_POLICY_NAME}: the Hive agent may change only its own finalizer \\(hive-operator.com/finalizer\\) and the status of a hive-operator.com/v1alpha1 HivePolicy`,
      ),
    );
  });

  it("does not apply to anyone but this monitor's agent", async () => {
    // Deleting is constrained by this policy only (the agent-only policy leaves it open).
    for (const name of ["foreign-1", "foreign-2"])
      expect(await agentB.createData(labelled(name, "node-b"))).toBe("allowed");
    expect(await admin.client.deleteData("foreign-1")).toBe("allowed");

    // A ServiceAccount of the same name in another namespace, on node-a, with RBAC to write HiveData.
    const kc = api.cp.adminKubeConfig();
    const core = kc.makeApiClient(CoreV1Api);
    const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
    await core.createNamespace({ body: { metadata: { name: "other" } } });
    await core.createNamespacedServiceAccount({
      namespace: "other",
      body: { metadata: { name: "hive-agent" } },
    });
    const pod = await core.createNamespacedPod({
      namespace: "other",
      body: {
        metadata: { name: "lookalike" },
        spec: {
          nodeName: "node-a",
          serviceAccountName: "hive-agent",
          containers: [{ name: "c", image: "x" }],
        },
      },
    });
    await rbac.createNamespacedRole({
      namespace: NS,
      body: {
        metadata: { name: "lookalike" },
        rules: [
          { apiGroups: [GROUP], resources: [PLURAL_DATA], verbs: ["get", "create", "update", "delete"] },
        ],
      },
    });
    await rbac.createNamespacedRoleBinding({
      namespace: NS,
      body: {
        metadata: { name: "lookalike" },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "lookalike" },
        subjects: [{ kind: "ServiceAccount", name: "hive-agent", namespace: "other" }],
      },
    });
    const token = await boundToken(kc, "other", "hive-agent", {
      name: "lookalike",
      uid: pod.metadata?.uid ?? "",
    });
    const lookalike = new Client(api.cp.kubeConfig(token));
    expect(await lookalike.deleteData("foreign-2")).toBe("allowed");
    // Writing HiveData is the agent-only policy's to refuse, for every other user alike.
    expect(await lookalike.createData(labelled("foreign-3", "node-b"))).toMatch(
      new RegExp(
        `^${AGENT_ONLY_POLICY_NAME}: only the Hive agent \\(system:serviceaccount:${NS}:hive-agent\\)`,
      ),
    );
    expect(await admin.client.createData(labelled("foreign-3", "node-b"))).toMatch(
      new RegExp(`^${AGENT_ONLY_POLICY_NAME}: only the Hive agent`),
    );
  });

  describe("a loader's re-resolve request on another node's HiveData (a kernel shared by nodes)", () => {
    /** Node B's HiveData as its agent writes it: annotations, an owner; the server adds managed fields. */
    const othersData = (name: string, annotations = true) =>
      agentB.createData({
        ...labelled(name, "node-b"),
        ...(annotations
          ? { annotations: { path: "/etc/shadow", callback: "https://alerts.example/hive" } }
          : {}),
        ownerReferences: [
          { apiVersion: "v1", kind: "Pod", name: "web", uid: "6f1c5a3e-0000-4000-8000-000000000001" },
        ],
      });
    const request = (value: string | null, more: Record<string, string | null> = {}) => ({
      metadata: { annotations: { [ANNOTATION_RESOLVE_REQUEST]: value, ...more } },
    });

    it("is allowed when the annotation is all that changes, set or refreshed", async () => {
      expect(await othersData("rr-set")).toBe("allowed");
      expect(await agentA.patchData("rr-set", request("1767225600000"))).toBe("allowed");
      expect(await agentA.patchData("rr-set", request("1767225600250"))).toBe("allowed");
    });

    it("is allowed on HiveData without any other annotation", async () => {
      expect(await othersData("rr-bare", false)).toBe("allowed");
      expect(await agentA.patchData("rr-bare", request("5"))).toBe("allowed");
    });

    it("is denied when it sneaks in another change", async () => {
      expect(await othersData("rr-sneak")).toBe("allowed");
      // Another annotation changed (e.g. the callback the alerts of that node go to).
      expect(
        await agentA.patchData(
          "rr-sneak",
          request("1767225600000", { callback: "https://attacker.example/" }),
        ),
      ).toBe(NOT_OTHERS);
      // Another annotation added, or one removed.
      expect(await agentA.patchData("rr-sneak", request("1", { extra: "x" }))).toBe(NOT_OTHERS);
      expect(await agentA.patchData("rr-sneak", request("1", { path: null }))).toBe(NOT_OTHERS);
      // The watched inode (blinding that node), the labels, the owner or the finalizers.
      expect(await agentA.patchData("rr-sneak", { ...request("1"), spec: { "inode-no": "7" } })).toBe(
        NOT_OTHERS,
      );
      const also = (metadata: Partial<Meta>) => ({ metadata: { ...request("1").metadata, ...metadata } });
      expect(await agentA.patchData("rr-sneak", also({ labels: { "trap-id": "zzz" } }))).toBe(NOT_OTHERS);
      expect(await agentA.patchData("rr-sneak", also({ ownerReferences: [] }))).toBe(NOT_OTHERS);
      expect(await agentA.patchData("rr-sneak", also({ finalizers: ["x/y"] }))).toBe(NOT_OTHERS);
      // Moving it to this node is a take-over, annotation or not.
      expect(await agentA.patchData("rr-sneak", also({ labels: { [LABEL_NODE]: "node-a" } }))).toBe(
        NOT_OTHERS,
      );
    });

    it("is denied when the value is not a timestamp, or the annotation is removed or unchanged-and-absent", async () => {
      expect(await othersData("rr-value")).toBe("allowed");
      expect(await agentA.patchData("rr-value", request("soon; rm -rf /"))).toBe(NOT_OTHERS);
      expect(await agentA.patchData("rr-value", request("1".repeat(21)))).toBe(NOT_OTHERS);
      expect(await agentA.patchData("rr-value", request("1767225600000"))).toBe("allowed");
      expect(await agentA.patchData("rr-value", request(null))).toBe(NOT_OTHERS);
      // A no-op update of someone else's object still needs the annotation: nothing else is ever allowed.
      expect(await othersData("rr-noop")).toBe("allowed");
      expect(await agentA.replaceData("rr-noop", () => {})).toBe(NOT_OTHERS);
    });

    it("never lets another node's HiveData be created or deleted", async () => {
      expect(await othersData("rr-delete")).toBe("allowed");
      expect(await agentA.patchData("rr-delete", request("1"))).toBe("allowed");
      expect(await agentA.deleteData("rr-delete")).toBe(NOT_OTHERS);
      expect(
        await agentA.createData({
          ...labelled("rr-create", "node-b"),
          annotations: { [ANNOTATION_RESOLVE_REQUEST]: "1" },
        }),
      ).toBe(MAY_ONLY_WRITE_OWN);
    });
  });

  it("each refusal is in the server's audit log, under the agent's user and the policy that denied it", () => {
    const refused = api.cp.audit.refusals({ user: hive.agentUser, resource: PLURAL_DATA });
    expect(refused.length).toBeGreaterThan(10);
    for (const e of refused) {
      expect(e.responseStatus?.code).toBe(403);
      expect(policyDenial(e.responseStatus?.message ?? "")?.policy).toBe(ADMISSION_POLICY_NAME);
    }
  });
});
