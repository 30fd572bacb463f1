/**
 * The ValidatingAdmissionPolicy evaluated as the API server would: its matchConditions,
 * variables and validations are CEL, run here by an independent CEL implementation against
 * the admission requests a compromised or a well-behaved agent would send.
 */
import { evaluate } from "@marcbachmann/cel-js";
import { describe, expect, it } from "vitest";
import { ANNOTATION_RESOLVE_REQUEST, LABEL_NODE } from "../../api/index.ts";
import { type KubernetesObject, renderManifests } from "../../component/index.ts";
import { MINIMAL } from "./configs.ts";

interface Spec {
  matchConstraints: { resourceRules: { resources: string[]; operations: string[] }[] };
  matchConditions: { name: string; expression: string }[];
  variables: { name: string; expression: string }[];
  validations: { expression: string; message?: string; messageExpression?: string }[];
}

const policy = renderManifests(MINIMAL).find(
  (o) => o.kind === "ValidatingAdmissionPolicy",
) as KubernetesObject;
const spec = policy.spec as Spec;
const AGENT = "system:serviceaccount:hive-system:hive-agent";

type Obj = {
  metadata: {
    name: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: unknown[];
    finalizers?: string[];
    managedFields?: unknown[];
  };
  spec?: unknown;
} | null;

interface Request {
  user?: string;
  node?: string | undefined;
  operation: "CREATE" | "UPDATE" | "DELETE";
  resource: "hivedata" | "hivepolicies";
  object: Obj;
  oldObject: Obj;
}

/** "allowed", "not matched", or the denial message. */
function admit(r: Request): string {
  const rule = spec.matchConstraints.resourceRules.find((x) => x.resources.includes(r.resource));
  if (!rule?.operations.includes(r.operation)) return "not matched";
  const request = {
    operation: r.operation,
    resource: { group: "hive-operator.com", version: "v1alpha1", resource: r.resource },
    subResource: "",
    userInfo: {
      username: r.user ?? AGENT,
      extra: r.node === undefined ? {} : { "authentication.kubernetes.io/node-name": [r.node] },
    },
  };
  const context: Record<string, unknown> = { request, object: r.object, oldObject: r.oldObject };
  for (const c of spec.matchConditions) if (evaluate(c.expression, context) !== true) return "not matched";
  const variables: Record<string, unknown> = {};
  context.variables = variables;
  for (const v of spec.variables) variables[v.name] = evaluate(v.expression, context);
  for (const v of spec.validations) {
    if (evaluate(v.expression, context) !== true) {
      return v.messageExpression ? String(evaluate(v.messageExpression, context)) : String(v.message);
    }
  }
  return "allowed";
}

const data = (node?: string) => ({
  metadata: {
    name: "hive-data-x",
    ...(node === undefined ? {} : { labels: { [LABEL_NODE]: node, "trap-id": "abc" } }),
  },
  spec: { "inode-no": 42 },
});
const hivePolicy = (path: string, finalizers = false) => ({
  metadata: { name: "p", ...(finalizers ? { finalizers: ["hive-operator.com/finalizer"] } : {}) },
  spec: { traps: [{ path }] },
});

const NOT_OTHERS =
  "the Hive agent of node node-a may not change or delete HiveData of node node-b " +
  `(it may only set ${ANNOTATION_RESOLVE_REQUEST} to a timestamp, changing nothing else)`;

/** Another node's HiveData as the API server holds it: annotations, owner, managed fields. */
const othersData = (extra: { annotations?: Record<string, string>; spec?: unknown } = {}) => ({
  metadata: {
    name: "hive-data-y",
    labels: { [LABEL_NODE]: "node-b", "trap-id": "abc" },
    annotations: { path: "/etc/shadow", callback: "https://alerts.example/hive", ...extra.annotations },
    ownerReferences: [{ apiVersion: "v1", kind: "Pod", name: "web", uid: "u-1" }],
    managedFields: [{ manager: "hive-agent", operation: "Update", time: "2026-01-01T00:00:00Z" }],
  },
  spec: extra.spec ?? { "inode-no": 42, device: { major: 0, minor: 50 } },
});

/** `old` after a merge patch: metadata overrides, and the API server's new managedFields entry. */
const patched = (old: ReturnType<typeof othersData>, metadata: Record<string, unknown>, spec?: unknown) => ({
  ...old,
  metadata: {
    ...old.metadata,
    ...metadata,
    managedFields: [{ manager: "hive-agent", operation: "Update", time: "2026-01-01T00:05:00Z" }],
  },
  spec: spec ?? old.spec,
});

/** A HiveData request by node-a's agent. */
const agentA = (operation: Request["operation"], object: Obj, oldObject: Obj) =>
  admit({ node: "node-a", operation, resource: "hivedata", object, oldObject });

const resolveRequest = (object: Obj, oldObject: Obj) => agentA("UPDATE", object, oldObject);

describe("the agent admission policy", () => {
  it("lets an agent create, update and delete the HiveData of its own node", () => {
    expect(agentA("CREATE", data("node-a"), null)).toBe("allowed");
    expect(agentA("UPDATE", data("node-a"), data("node-a"))).toBe("allowed");
    expect(agentA("DELETE", null, data("node-a"))).toBe("allowed");
  });

  it("denies HiveData for another node, or with no node label", () => {
    expect(agentA("CREATE", data("node-b"), null)).toBe(
      `the Hive agent of node node-a may only write HiveData labelled ${LABEL_NODE}=node-a`,
    );
    expect(agentA("CREATE", data(), null)).toBe(
      `the Hive agent of node node-a may only write HiveData labelled ${LABEL_NODE}=node-a`,
    );
  });

  it("denies taking over, rewriting or deleting another node's HiveData", () => {
    expect(agentA("UPDATE", data("node-a"), data("node-b"))).toBe(NOT_OTHERS);
    expect(agentA("DELETE", null, data("node-b"))).toBe(NOT_OTHERS);
  });

  it("fails closed when the agent's token names no node", () => {
    expect(
      admit({
        node: undefined,
        operation: "CREATE",
        resource: "hivedata",
        object: data("node-a"),
        oldObject: null,
      }),
    ).toMatch(/^the hive-agent token carries no node name/);
  });

  it("lets the agent add its finalizer to a HivePolicy but not change the traps", () => {
    const old = hivePolicy("/etc/shadow");
    expect(
      admit({
        node: "node-a",
        operation: "UPDATE",
        resource: "hivepolicies",
        object: hivePolicy("/etc/shadow", true),
        oldObject: old,
      }),
    ).toBe("allowed");
    expect(
      admit({
        node: "node-a",
        operation: "UPDATE",
        resource: "hivepolicies",
        object: hivePolicy("/tmp/x"),
        oldObject: old,
      }),
    ).toMatch(
      /may change only its own finalizer \(hive-operator.com\/finalizer\) and the status of a hive-operator.com\/v1alpha1 HivePolicy/,
    );
  });

  it("does not apply to anyone but this monitor's agent", () => {
    const foreign = {
      operation: "CREATE",
      resource: "hivedata",
      object: data("node-b"),
      oldObject: null,
    } as const;
    expect(admit({ ...foreign, user: "kubernetes-admin", node: undefined })).toBe("not matched");
    expect(admit({ ...foreign, user: "system:serviceaccount:other:hive-agent", node: "node-a" })).toBe(
      "not matched",
    );
  });

  describe("a loader's re-resolve request on another node's HiveData (a kernel shared by nodes)", () => {
    const old = othersData();
    const withRequest = (value: string, rest: Record<string, string> = {}) => ({
      annotations: { ...old.metadata.annotations, ...rest, [ANNOTATION_RESOLVE_REQUEST]: value },
    });

    it("is allowed when the annotation is all that changes, set or refreshed", () => {
      expect(resolveRequest(patched(old, withRequest("1767225600000")), old)).toBe("allowed");
      const requested = patched(old, withRequest("1767225600000"));
      expect(resolveRequest(patched(requested, withRequest("1767225600250")), requested)).toBe("allowed");
    });

    it("is allowed on HiveData without any other annotation", () => {
      const bare = { ...old, metadata: { ...old.metadata, annotations: undefined } };
      const { annotations: _none, ...metadata } = bare.metadata;
      const oldBare = { ...bare, metadata };
      expect(
        resolveRequest(
          { ...oldBare, metadata: { ...metadata, annotations: { [ANNOTATION_RESOLVE_REQUEST]: "5" } } },
          oldBare,
        ),
      ).toBe("allowed");
    });

    it("is denied when it sneaks in another change", () => {
      // Another annotation changed (e.g. the callback the alerts of that node go to).
      expect(
        resolveRequest(
          patched(old, withRequest("1767225600000", { callback: "https://attacker.example/" })),
          old,
        ),
      ).toBe(NOT_OTHERS);
      // Another annotation added, or one removed.
      expect(resolveRequest(patched(old, withRequest("1", { extra: "x" })), old)).toBe(NOT_OTHERS);
      const { path: _path, ...withoutPath } = withRequest("1").annotations;
      expect(resolveRequest(patched(old, { annotations: withoutPath }), old)).toBe(NOT_OTHERS);
      // The watched inode (blinding that node), the labels, the owner or the finalizers.
      expect(
        resolveRequest(
          patched(old, withRequest("1"), { "inode-no": 7, device: { major: 0, minor: 50 } }),
          old,
        ),
      ).toBe(NOT_OTHERS);
      expect(
        resolveRequest(
          patched(old, { ...withRequest("1"), labels: { ...old.metadata.labels, "trap-id": "zzz" } }),
          old,
        ),
      ).toBe(NOT_OTHERS);
      expect(resolveRequest(patched(old, { ...withRequest("1"), ownerReferences: [] }), old)).toBe(
        NOT_OTHERS,
      );
      expect(resolveRequest(patched(old, { ...withRequest("1"), finalizers: ["x/y"] }), old)).toBe(
        NOT_OTHERS,
      );
      // Moving it to this node is a take-over, annotation or not.
      expect(
        resolveRequest(
          patched(old, { ...withRequest("1"), labels: { ...old.metadata.labels, [LABEL_NODE]: "node-a" } }),
          old,
        ),
      ).toBe(NOT_OTHERS);
    });

    it("is denied when the value is not a timestamp, or the annotation is removed or unchanged-and-absent", () => {
      expect(resolveRequest(patched(old, withRequest("soon; rm -rf /")), old)).toBe(NOT_OTHERS);
      expect(resolveRequest(patched(old, withRequest("1".repeat(21))), old)).toBe(NOT_OTHERS);
      const requested = patched(old, withRequest("1767225600000"));
      expect(resolveRequest(patched(requested, { annotations: old.metadata.annotations }), requested)).toBe(
        NOT_OTHERS,
      );
      // A no-op update of someone else's object still needs the annotation: nothing else is ever allowed.
      expect(resolveRequest(patched(old, {}), old)).toBe(NOT_OTHERS);
    });

    it("never lets another node's HiveData be created or deleted", () => {
      expect(agentA("DELETE", null, patched(old, withRequest("1")))).toBe(NOT_OTHERS);
      expect(agentA("CREATE", patched(old, withRequest("1")), null)).toBe(
        `the Hive agent of node node-a may only write HiveData labelled ${LABEL_NODE}=node-a`,
      );
    });
  });
});
