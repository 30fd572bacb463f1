/**
 * Every object the component renders, validated offline against the Kubernetes OpenAPI
 * schema of its kind (kubernetes-models), checked for fields Kubernetes does not know
 * (client-node's model attribute maps: the API server would drop or reject them), and each
 * CRD's openAPIV3Schema checked to be structural. HivePolicies are validated against the
 * schema of their own CRD.
 */
import * as k8s from "@kubernetes/client-node";
import { Ajv } from "ajv";
import { describe, expect, it } from "vitest";
import { hivePolicyCrd, validatePolicy } from "../../api/index.ts";
import { type KubernetesObject, renderManifests } from "../../component/index.ts";
import { FULL, MINIMAL } from "./configs.ts";
import { structuralViolations } from "./structural-schema.ts";

type Model = { getAttributeTypeMap(): { name: string; baseName: string; type: string }[] };
const models = k8s as unknown as Record<string, Model | undefined>;

/** Fields of `value` that the Kubernetes type `type` does not define. */
function unknownFields(value: unknown, type: string, path: string): string[] {
  const array = /^Array<(.+)>$/.exec(type);
  if (array?.[1] && Array.isArray(value))
    return value.flatMap((v, i) => unknownFields(v, array[1] as string, `${path}[${i}]`));
  const map = /^\{ \[key: string\]: (.+); \}$/.exec(type);
  if (map?.[1] && value && typeof value === "object") {
    return Object.entries(value).flatMap(([k, v]) => unknownFields(v, map[1] as string, `${path}.${k}`));
  }
  const model = models[type];
  if (!model?.getAttributeTypeMap || value === null || typeof value !== "object") return [];
  const attributes = new Map(model.getAttributeTypeMap().map((a) => [a.baseName, a.type]));
  return Object.entries(value).flatMap(([k, v]) => {
    const t = attributes.get(k);
    return t === undefined ? [`${path}.${k} (not a field of ${type})`] : unknownFields(v, t, `${path}.${k}`);
  });
}

/** The kubernetes-models class of a kind, e.g. kubernetes-models/apps/v1/DaemonSet. */
async function modelClass(o: KubernetesObject) {
  const module = await import(`kubernetes-models/${o.apiVersion}/${o.kind}`);
  return module[o.kind] as new (
    data: unknown,
  ) => { validate(): void };
}

/** A CRD schema as a closed JSON Schema: structural schemas prune unknown fields, we flag them. */
function closed(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(closed);
  if (schema === null || typeof schema !== "object") return schema;
  const s = Object.fromEntries(Object.entries(schema).map(([k, v]) => [k, k === "enum" ? v : closed(v)]));
  if (s.properties && !s["x-kubernetes-preserve-unknown-fields"] && s.additionalProperties === undefined)
    s.additionalProperties = false;
  return s;
}

const ajv = new Ajv({ strict: false, validateFormats: false, allErrors: true });
const [policyVersion] = hivePolicyCrd().spec.versions as { schema: { openAPIV3Schema: unknown } }[];
const validateHivePolicy = ajv.compile(closed(policyVersion?.schema.openAPIV3Schema) as object);

async function problemsOf(o: KubernetesObject): Promise<string[]> {
  if (o.kind === "HivePolicy") {
    const problems = validateHivePolicy(o)
      ? []
      : (validateHivePolicy.errors ?? []).map((e) => `${e.instancePath} ${e.message}`);
    const own = validatePolicy(o);
    return own.ok ? problems : [...problems, ...own.errors.map((e) => `${e.field}: ${e.message}`)];
  }
  const problems: string[] = [];
  try {
    new (await modelClass(o))(o).validate();
  } catch (error) {
    problems.push((error as Error).message);
  }
  return [...problems, ...unknownFields(o, `V1${o.kind}`, o.kind)];
}

describe.each([
  ["minimal", MINIMAL],
  ["full", FULL],
])("objects rendered for the %s configuration", (_name, args) => {
  const objects = renderManifests(args);

  it.each(objects.map((o) => [`${o.kind} ${o.metadata.name}`, o] as const))(
    "%s is valid for its kind's OpenAPI schema, with no unknown field",
    async (_label, o) => {
      expect(await problemsOf(o)).toEqual([]);
    },
  );
});

describe("the CRDs", () => {
  const crds = renderManifests(MINIMAL).filter((o) => o.kind === "CustomResourceDefinition");

  it.each(crds.map((c) => [c.metadata.name, c] as const))(
    "%s has a structural openAPIV3Schema in every version",
    (_n, crd) => {
      const versions = (crd.spec as { versions: { name: string; schema: { openAPIV3Schema: unknown } }[] })
        .versions;
      expect(versions.length).toBeGreaterThan(0);
      for (const v of versions)
        expect(structuralViolations(v.schema.openAPIV3Schema, `${v.name}.openAPIV3Schema`)).toEqual([]);
    },
  );
});

describe("the validation itself", () => {
  const daemonSet = renderManifests(MINIMAL).find((o) => o.kind === "DaemonSet") as KubernetesObject;

  it("rejects a value of the wrong type", async () => {
    const broken = structuredClone(daemonSet) as unknown as {
      spec: { template: { spec: { hostPID: unknown } } };
    };
    broken.spec.template.spec.hostPID = "yes";
    expect((await problemsOf(broken as unknown as KubernetesObject)).join("\n")).toMatch(
      /hostPID must be boolean/,
    );
  });

  it("rejects a field Kubernetes does not know", async () => {
    const typo = structuredClone(daemonSet) as unknown as {
      spec: { template: { spec: Record<string, unknown> } };
    };
    typo.spec.template.spec.hostPid = true;
    expect(await problemsOf(typo as unknown as KubernetesObject)).toEqual([
      "DaemonSet.spec.template.spec.hostPid (not a field of V1PodSpec)",
    ]);
  });

  it("rejects a HivePolicy its CRD would not admit", async () => {
    const policy = renderManifests(FULL).find((o) => o.kind === "HivePolicy") as KubernetesObject;
    const bad = structuredClone(policy) as unknown as { spec: { traps: Record<string, unknown>[] } };
    (bad.spec.traps[0] as Record<string, unknown>).paths = "/etc/shadow";
    expect((await problemsOf(bad as unknown as KubernetesObject)).join("\n")).toMatch(
      /must NOT have additional properties/,
    );
  });
});
