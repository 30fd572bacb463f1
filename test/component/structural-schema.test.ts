/**
 * The structural-schema checker itself: it must reject what the API server rejects, and accept
 * what it accepts. Every case is also sent to a real kube-apiserver as a CRD (a server-side dry
 * run by the real kubectl, with its strict field validation), whose answer is the reference.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runKubectl } from "../cluster/kubectl-run.ts";
import { type RealApi, startRealApi } from "../cluster/real-api.ts";
import { structuralViolations } from "./structural-schema.ts";

let api: RealApi;

beforeAll(async () => {
  api = await startRealApi({ controllerManager: false });
});
afterAll(async () => {
  await api?.stop();
});

/**
 * What the real server says of a CRD whose one version has `schema`: "" when it accepts it, else
 * kubectl's error. Sent as JSON through kubectl: a typed client would drop the `x-kubernetes-*`
 * keys of a plain object before they reach the server.
 */
function serverAnswer(schema: unknown): string {
  const crd = {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: "things.schema.example.com" },
    spec: {
      group: "schema.example.com",
      scope: "Namespaced",
      names: { kind: "Thing", plural: "things" },
      versions: [{ name: "v1", served: true, storage: true, schema: { openAPIV3Schema: schema } }],
    },
  };
  const run = runKubectl(
    api.cp,
    ["create", "--dry-run=server", "-o", "name", "-f", "-"],
    JSON.stringify(crd),
  );
  if (run.code === 0) {
    expect(run.stdout.trim()).toBe("customresourcedefinition.apiextensions.k8s.io/things.schema.example.com");
    return "";
  }
  expect(run.stderr).not.toBe("");
  return run.stderr;
}

const ok = {
  type: "object",
  properties: { spec: { type: "object", properties: { a: { type: "string" } } } },
};

describe("structuralViolations", () => {
  it.each([
    ["a structural schema", ok],
    [
      "int-or-string, preserve-unknown-fields and set nodes",
      {
        type: "object",
        properties: {
          port: { "x-kubernetes-int-or-string": true, anyOf: [{ type: "integer" }, { type: "string" }] },
          free: { "x-kubernetes-preserve-unknown-fields": true },
          list: { type: "array", "x-kubernetes-list-type": "set", items: { type: "string" } },
        },
      },
    ],
    // The three below the server accepts, against what the structural-schema documentation suggests.
    [
      "a junctor naming a property not specified outside it",
      {
        type: "object",
        properties: { a: { type: "object", anyOf: [{ properties: { b: { minLength: 1 } } }] } },
      },
    ],
    [
      "an int-or-string node with a type",
      { type: "object", properties: { a: { "x-kubernetes-int-or-string": true, type: "string" } } },
    ],
    [
      "additionalProperties: false below the root, without properties",
      { type: "object", properties: { o: { type: "object", additionalProperties: false } } },
    ],
  ])("accepts %s, as the API server does", (_what, schema) => {
    expect(structuralViolations(schema)).toEqual([]);
    expect(serverAnswer(schema)).toBe("");
  });

  it.each([
    [
      { type: "object", properties: { a: {} } },
      "openAPIV3Schema.properties.a: must specify a type",
      "spec.validation.openAPIV3Schema.properties[a].type: Required value: must not be empty for specified object fields",
    ],
    [
      { type: "object", properties: { a: { type: "array", items: {} } } },
      "openAPIV3Schema.properties.a.items: must specify a type",
      "spec.validation.openAPIV3Schema.properties[a].items.type: Required value: must not be empty for specified array items",
    ],
    [
      {
        type: "object",
        properties: {
          o: {
            type: "object",
            properties: { a: { type: "string" } },
            additionalProperties: { type: "string" },
          },
        },
      },
      "openAPIV3Schema.properties.o: properties and additionalProperties are mutually exclusive",
      "spec.validation.openAPIV3Schema.properties[o].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive",
    ],
    [
      {
        type: "object",
        properties: {
          o: { type: "object", properties: { a: { type: "string" } }, additionalProperties: false },
        },
      },
      "openAPIV3Schema.properties.o: properties and additionalProperties are mutually exclusive",
      "spec.validation.openAPIV3Schema.properties[o].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive",
    ],
    [
      { type: "object", additionalProperties: false },
      "openAPIV3Schema: additionalProperties must not be used at the root",
      "spec.validation.openAPIV3Schema.additionalProperties: Forbidden: must not be used at the root",
    ],
    [
      { type: "array", items: { type: "string" } },
      "openAPIV3Schema: the root must be type: object",
      'spec.validation.openAPIV3Schema.type: Invalid value: "array": must be object at the root',
    ],
    [
      { type: "object", properties: { l: { type: "array", uniqueItems: true, items: { type: "string" } } } },
      "openAPIV3Schema.properties.l: uniqueItems cannot be true (use x-kubernetes-list-type: set)",
      "spec.validation.openAPIV3Schema.properties[l].uniqueItems: Forbidden: uniqueItems cannot be set to true",
    ],
    [
      { type: "object", properties: { a: { anyOf: [{ type: "integer" }, { type: "string" }] } } },
      "openAPIV3Schema.properties.a: must specify a type",
      "spec.validation.openAPIV3Schema.properties[a].type: Required value: must not be empty for specified object fields",
    ],
    [
      { type: "object", properties: { a: { type: "string", anyOf: [{ type: "string", pattern: "x" }] } } },
      'openAPIV3Schema.properties.a.anyOf: "type" is not allowed inside allOf/anyOf/oneOf/not',
      "spec.validation.openAPIV3Schema.properties[a].anyOf[0].type: Forbidden: must be empty to be structural",
    ],
    [
      { type: "object", properties: { a: { type: "string", const: "x" } } },
      'openAPIV3Schema.properties.a: "const" is not allowed in a CRD schema',
      'strict decoding error: unknown field "spec.versions[0].schema.openAPIV3Schema.properties.a.const"',
    ],
    [
      {
        type: "object",
        properties: { o: { type: "object", patternProperties: { "^a": { type: "string" } } } },
      },
      'openAPIV3Schema.properties.o: "patternProperties" is not allowed in a CRD schema',
      "spec.validation.openAPIV3Schema.properties[o].patternProperties: Forbidden: patternProperties is not supported",
    ],
    [
      {
        type: "object",
        properties: {
          l: {
            type: "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["k"],
            items: { type: "object", properties: { k: { type: "string" } } },
          },
        },
      },
      "openAPIV3Schema.properties.l: map key k must be required or defaulted",
      "spec.validation.openAPIV3Schema.properties[l].items.properties[k].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
    ],
    [
      {
        type: "object",
        properties: { metadata: { type: "object", properties: { labels: { type: "object" } } } },
      },
      "openAPIV3Schema.properties.metadata: only name and generateName may be restricted (found labels)",
      "spec.validation.openAPIV3Schema.properties[metadata]: Forbidden: must not specify anything other than name and generateName",
    ],
    [
      { type: "object", properties: { a: { type: "str" } } },
      'openAPIV3Schema.properties.a: type "str" is not a Kubernetes type',
      'spec.validation.openAPIV3Schema.properties[a].type: Unsupported value: "str"',
    ],
  ])("rejects %j, as the API server does", (schema, violation, refusal) => {
    expect(structuralViolations(schema)).toContain(violation);
    expect(serverAnswer(schema)).toContain(refusal);
  });
});
