/**
 * Hive's report CRDs (api/report.ts → api/crd.ts) against the published ones, read from the
 * modules that carry them (Kyverno's for PolicyReport, OpenReports' for Report), as the Go module
 * proxy serves them, in the module cache at test time: same names and scope, and every field Hive writes exists there with the same type, the
 * same allowed values and the same required fields, so a report Hive writes is valid under either.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { type JsonSchema, policyReportCrd } from "../../api/crd.ts";
import { REPORT_FORMAT_NAMES, REPORT_FORMATS, type ReportFormat } from "../../api/report.ts";
import { moduleDir } from "../cluster/go-toolchain.ts";

/**
 * Where each published CRD is: the PolicyReport one in a Kyverno release (the wg-policy module is
 * not served by the Go module proxy), the Report one in OpenReports' own API module.
 */
const PUBLISHED: Record<ReportFormat, { module: string; version: string; file: string }> = {
  policyreport: {
    module: "github.com/kyverno/kyverno",
    version: "v1.19.1",
    file: "config/crds/policyreport/wgpolicyk8s.io_policyreports.yaml",
  },
  openreports: {
    module: "github.com/openreports/reports-api",
    version: "v0.2.1",
    file: "config/crd/openreports.io_reports.yaml",
  },
};

interface Crd {
  metadata: { name: string };
  spec: {
    group: string;
    scope: string;
    names: { kind: string; plural: string; singular?: string; listKind?: string };
    versions: { name: string; served: boolean; storage: boolean; schema: { openAPIV3Schema: JsonSchema } }[];
  };
}

/** Differences between `ours` and `published` at every node `ours` defines (empty when it fits). */
function differences(ours: JsonSchema, published: JsonSchema | undefined, path = ""): string[] {
  if (!published) return [`${path || "/"}: not in the published schema`];
  const out: string[] = [];
  if (ours.type !== published.type) out.push(`${path}: type ${ours.type} ≠ ${published.type}`);
  const ourEnum = ours.enum as unknown[] | undefined;
  const theirEnum = published.enum as unknown[] | undefined;
  if (ourEnum && !ourEnum.every((v) => theirEnum?.includes(v)))
    out.push(`${path}: enum ${JSON.stringify(ourEnum)} ⊄ ${JSON.stringify(theirEnum)}`);
  if (ours.type === "object") {
    const required = [...((ours.required as string[]) ?? [])].sort();
    const theirRequired = [...((published.required as string[]) ?? [])].sort();
    if (required.join() !== theirRequired.join())
      out.push(`${path}: required [${required}] ≠ [${theirRequired}]`);
  }
  const props = (ours.properties ?? {}) as Record<string, JsonSchema>;
  const theirProps = (published.properties ?? {}) as Record<string, JsonSchema>;
  for (const [k, v] of Object.entries(props)) {
    // metadata is the API server's own; both declare it as a bare object.
    if (path === "" && k === "metadata") continue;
    out.push(...differences(v, theirProps[k], `${path}.${k}`));
  }
  if (ours.items)
    out.push(...differences(ours.items as JsonSchema, published.items as JsonSchema, `${path}[]`));
  if (typeof ours.additionalProperties === "object")
    out.push(
      ...differences(
        ours.additionalProperties as JsonSchema,
        published.additionalProperties as JsonSchema | undefined,
        `${path}{}`,
      ),
    );
  return out;
}

describe.each(REPORT_FORMAT_NAMES)("the %s CRD Hive can install", (format) => {
  const where = PUBLISHED[format];
  const published = parse(
    readFileSync(join(moduleDir(where.module, where.version), where.file), "utf8"),
  ) as Crd;
  const ours = policyReportCrd(format) as unknown as Crd;
  const REPORT_VERSION = REPORT_FORMATS[format].version;

  it("has the published names, scope and version", () => {
    expect(ours.metadata.name).toBe(published.metadata.name);
    expect(ours.spec.group).toBe(published.spec.group);
    expect(ours.spec.scope).toBe(published.spec.scope);
    expect(ours.spec.names.kind).toBe(published.spec.names.kind);
    expect(ours.spec.names.plural).toBe(published.spec.names.plural);
    expect(ours.spec.names.singular).toBe(published.spec.names.singular);
    expect(published.spec.versions.map((v) => v.name)).toContain(REPORT_VERSION);
  });

  it("defines only fields the published schema has, with their types, values and required fields", () => {
    const theirs = published.spec.versions.find((v) => v.name === REPORT_VERSION)?.schema.openAPIV3Schema;
    const mine = ours.spec.versions[0]?.schema.openAPIV3Schema as JsonSchema;
    expect(differences(mine, theirs)).toEqual([]);
  });

  it("the comparison notices a field the published schema lacks and a narrower enum", () => {
    const theirs = published.spec.versions.find((v) => v.name === REPORT_VERSION)?.schema.openAPIV3Schema;
    const mine = structuredClone(ours.spec.versions[0]?.schema.openAPIV3Schema) as JsonSchema;
    const results = (mine.properties as Record<string, JsonSchema>).results as JsonSchema;
    const item = results.items as { properties: Record<string, JsonSchema> };
    item.properties.verdict = { type: "string" };
    item.properties.result = { type: "string", enum: ["pass", "denied"] };
    const found = differences(mine, theirs).join("\n");
    expect(found).toContain(".results[].verdict: not in the published schema");
    expect(found).toContain(".results[].result: enum");
  });
});
