/**
 * The ValidatingAdmissionPolicy evaluated as the API server would: its matchConditions,
 * variables and validations are CEL, run here by an independent CEL implementation against
 * the admission requests a compromised or a well-behaved agent would send.
 */
import { evaluate } from "@marcbachmann/cel-js";
import { describe, expect, it } from "vitest";
import { LABEL_NODE } from "../../api/index.ts";
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

type Obj = { metadata: { name: string; labels?: Record<string, string> }; spec?: unknown } | null;

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

describe("the agent admission policy", () => {
  it("lets an agent create, update and delete the HiveData of its own node", () => {
    expect(
      admit({
        node: "node-a",
        operation: "CREATE",
        resource: "hivedata",
        object: data("node-a"),
        oldObject: null,
      }),
    ).toBe("allowed");
    expect(
      admit({
        node: "node-a",
        operation: "UPDATE",
        resource: "hivedata",
        object: data("node-a"),
        oldObject: data("node-a"),
      }),
    ).toBe("allowed");
    expect(
      admit({
        node: "node-a",
        operation: "DELETE",
        resource: "hivedata",
        object: null,
        oldObject: data("node-a"),
      }),
    ).toBe("allowed");
  });

  it("denies HiveData for another node, or with no node label", () => {
    expect(
      admit({
        node: "node-a",
        operation: "CREATE",
        resource: "hivedata",
        object: data("node-b"),
        oldObject: null,
      }),
    ).toBe(`the Hive agent of node node-a may only write HiveData labelled ${LABEL_NODE}=node-a`);
    expect(
      admit({ node: "node-a", operation: "CREATE", resource: "hivedata", object: data(), oldObject: null }),
    ).toBe(`the Hive agent of node node-a may only write HiveData labelled ${LABEL_NODE}=node-a`);
  });

  it("denies taking over, rewriting or deleting another node's HiveData", () => {
    expect(
      admit({
        node: "node-a",
        operation: "UPDATE",
        resource: "hivedata",
        object: data("node-a"),
        oldObject: data("node-b"),
      }),
    ).toBe("the Hive agent of node node-a may not change or delete HiveData of node node-b");
    expect(
      admit({
        node: "node-a",
        operation: "DELETE",
        resource: "hivedata",
        object: null,
        oldObject: data("node-b"),
      }),
    ).toBe("the Hive agent of node node-a may not change or delete HiveData of node node-b");
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
    ).toMatch(/may change only the finalizer and status of a hive-operator.com\/v1alpha1 HivePolicy/);
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
});
