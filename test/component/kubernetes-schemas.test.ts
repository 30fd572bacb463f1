/**
 * Every object the component renders, validated offline against the Kubernetes OpenAPI
 * schema of its kind (kubernetes-models), checked for fields Kubernetes does not know
 * (client-node's model attribute maps), and each CRD's openAPIV3Schema checked to be
 * structural. HivePolicies are validated against the schema of their own CRD. The same objects
 * then go to a real kube-apiserver (Hive's CRDs applied): a server-side dry run by the real
 * kubectl with strict field validation, which refuses a wrong value or an unknown field as the
 * server would otherwise drop it.
 */
import * as k8s from "@kubernetes/client-node";
import { Ajv } from "ajv";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hivePolicyCrd, validatePolicy } from "../../api/index.ts";
import { type KubernetesObject, renderManifests } from "../../component/index.ts";
import { applyObjects, kubectl } from "../cluster/install.ts";
import { runKubectl } from "../cluster/kubectl-run.ts";
import { type RealApi, startRealApi } from "../cluster/real-api.ts";
import { FULL, MINIMAL } from "./configs.ts";
import { structuralViolations } from "./structural-schema.ts";

let api: RealApi;

beforeAll(async () => {
  api = await startRealApi({ controllerManager: false });
  applyObjects(
    api.cp,
    renderManifests(MINIMAL).filter((o) => o.kind === "CustomResourceDefinition"),
  );
  // The namespaces the objects go in (a dry run creates none); FULL's is an existing one.
  for (const ns of ["hive-system", "security"]) kubectl(api.cp, ["create", "namespace", ns]);
});
afterAll(async () => {
  await api?.stop();
});

/** kubectl's error for `o` applied as a server-side dry run with strict field validation, or "". */
function serverProblems(o: unknown): string {
  const run = runKubectl(
    api.cp,
    ["apply", "--dry-run=server", "--validate=strict", "-o", "name", "-f", "-"],
    JSON.stringify(o),
  );
  return run.code === 0 ? "" : run.stderr || `kubectl exited ${run.code}`;
}

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
    "%s is valid for its kind's OpenAPI schema, with no unknown field, and the API server accepts it",
    async (_label, o) => {
      expect(await problemsOf(o)).toEqual([]);
      expect(serverProblems(o)).toBe("");
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

  it.each(crds.map((c) => [c.metadata.name, c] as const))(
    "%s is established by the API server as a structural schema",
    (name) => {
      const conditions = JSON.parse(
        kubectl(api.cp, ["get", "crd", name, "-o", "jsonpath={.status.conditions}"]),
      ) as { type: string; status: string }[];
      const status = Object.fromEntries(conditions.map((c) => [c.type, c.status]));
      expect(status).toMatchObject({ Established: "True", NamesAccepted: "True" });
      expect(status.NonStructuralSchema).toBeUndefined();
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
    expect(serverProblems(broken)).toContain("spec.template.spec.hostPID");
  });

  it("rejects a field Kubernetes does not know", async () => {
    const typo = structuredClone(daemonSet) as unknown as {
      spec: { template: { spec: Record<string, unknown> } };
    };
    typo.spec.template.spec.hostPid = true;
    expect(await problemsOf(typo as unknown as KubernetesObject)).toEqual([
      "DaemonSet.spec.template.spec.hostPid (not a field of V1PodSpec)",
    ]);
    expect(serverProblems(typo)).toContain('unknown field "spec.template.spec.hostPid"');
  });

  it("rejects a HivePolicy its CRD would not admit", async () => {
    const policy = renderManifests(FULL).find((o) => o.kind === "HivePolicy") as KubernetesObject;
    const bad = structuredClone(policy) as unknown as { spec: { traps: Record<string, unknown>[] } };
    (bad.spec.traps[0] as Record<string, unknown>).paths = "/etc/shadow";
    expect((await problemsOf(bad as unknown as KubernetesObject)).join("\n")).toMatch(
      /must NOT have additional properties/,
    );
    expect(serverProblems(bad)).toContain('unknown field "spec.traps[0].paths"');
  });
});
