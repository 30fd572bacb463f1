/** The structural-schema checker itself: it must reject what the API server rejects. */
import { describe, expect, it } from "vitest";
import { structuralViolations } from "./structural-schema.ts";

const ok = {
  type: "object",
  properties: { spec: { type: "object", properties: { a: { type: "string" } } } },
};

describe("structuralViolations", () => {
  it("accepts a structural schema, int-or-string and preserve-unknown-fields nodes", () => {
    expect(structuralViolations(ok)).toEqual([]);
    expect(
      structuralViolations({
        type: "object",
        properties: {
          port: { "x-kubernetes-int-or-string": true, anyOf: [{ type: "integer" }, { type: "string" }] },
          free: { "x-kubernetes-preserve-unknown-fields": true },
          list: { type: "array", "x-kubernetes-list-type": "set", items: { type: "string" } },
        },
      }),
    ).toEqual([]);
  });

  it.each([
    [{ type: "object", properties: { a: {} } }, "openAPIV3Schema.properties.a: must specify a type"],
    [
      { type: "object", properties: { a: { type: "array", items: {} } } },
      "openAPIV3Schema.properties.a.items: must specify a type",
    ],
    [
      { type: "object", properties: { a: { type: "string" } }, additionalProperties: { type: "string" } },
      "openAPIV3Schema: properties and additionalProperties are mutually exclusive",
    ],
    [
      { type: "object", additionalProperties: false },
      "openAPIV3Schema: additionalProperties cannot be false",
    ],
    [
      { type: "array", uniqueItems: true, items: { type: "string" } },
      "openAPIV3Schema: uniqueItems cannot be true (use x-kubernetes-list-type: set)",
    ],
    [
      { type: "object", properties: { a: { anyOf: [{ type: "integer" }, { type: "string" }] } } },
      "openAPIV3Schema.properties.a: must specify a type",
    ],
    [
      { type: "object", properties: { a: { type: "string", anyOf: [{ type: "string", pattern: "x" }] } } },
      'openAPIV3Schema.properties.a.anyOf: "type" is not allowed inside allOf/anyOf/oneOf/not',
    ],
    [
      {
        type: "object",
        properties: { a: { type: "object", anyOf: [{ properties: { b: { minLength: 1 } } }] } },
      },
      "openAPIV3Schema.properties.a.anyOf.properties.b: specified in a junctor but not outside it",
    ],
    [
      { type: "object", properties: { a: { "x-kubernetes-int-or-string": true, type: "string" } } },
      "openAPIV3Schema.properties.a: x-kubernetes-int-or-string must not have a type",
    ],
    [
      { type: "object", properties: { a: { type: "string", const: "x" } } },
      'openAPIV3Schema.properties.a: "const" is not allowed in a CRD schema',
    ],
    [
      { type: "object", patternProperties: { "^a": { type: "string" } } },
      'openAPIV3Schema: "patternProperties" is not allowed in a CRD schema',
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
    ],
    [
      {
        type: "object",
        properties: { metadata: { type: "object", properties: { labels: { type: "object" } } } },
      },
      "openAPIV3Schema.properties.metadata: only name and generateName may be restricted (found labels)",
    ],
    [
      { type: "object", properties: { a: { type: "str" } } },
      'openAPIV3Schema.properties.a: type "str" is not a Kubernetes type',
    ],
  ])("rejects %j", (schema, violation) => {
    expect(structuralViolations(schema)).toContain(violation);
  });
});
