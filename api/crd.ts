/**
 * CustomResourceDefinitions derived from the schemas in api/: the only place where a
 * TypeBox schema becomes a Kubernetes structural `openAPIV3Schema`. Constructs the API
 * server does not accept in a structural schema are translated, never dropped silently:
 * literal unions become `enum`, records become `additionalProperties`, an integer|string
 * union becomes `x-kubernetes-int-or-string`, formats the API server does not know are
 * enforced by the CEL rules written beside them.
 */
import type { TSchema } from "@sinclair/typebox";
import { HiveDataSpecSchema } from "./data.ts";
import { API_VERSION, GROUP, KIND_DATA, KIND_POLICY, PLURAL_DATA, PLURAL_POLICY, VERSION } from "./meta.ts";
import { HivePolicySpecSchema, HivePolicyStatusSchema } from "./policy.ts";
import { REPORT_FORMATS, type ReportFormat, ReportResultSchema, ReportSummarySchema } from "./report.ts";

export type JsonSchema = { [key: string]: unknown };

/** Formats the API server validates itself; any other format is left to CEL and to api/validate.ts. */
const KUBERNETES_FORMATS = new Set(["date-time", "ipv4", "uuid", "int64", "int32", "byte", "date"]);
/** Keywords with no meaning for the API server (TypeBox's own, or ours). */
const DROPPED = new Set(["$id", "errorMessage", "title"]);

function isLiteral(s: JsonSchema): boolean {
  return "const" in s;
}

/** Translate one TypeBox JSON Schema node into a structural schema node. */
export function toStructural(node: TSchema | JsonSchema): JsonSchema {
  const s = JSON.parse(JSON.stringify(node)) as JsonSchema;
  return convert(s);
}

function convert(s: JsonSchema): JsonSchema {
  const out: JsonSchema = {};
  const anyOf = s.anyOf as JsonSchema[] | undefined;
  if (anyOf) {
    if (anyOf.every(isLiteral)) {
      out.type = anyOf[0]?.type ?? "string";
      out.enum = anyOf.map((a) => a.const);
    } else if (s["x-kubernetes-int-or-string"] === true) {
      out["x-kubernetes-int-or-string"] = true;
      out.anyOf = [{ type: "integer" }, { type: "string" }];
    } else {
      throw new Error(`schema union ${JSON.stringify(s).slice(0, 120)} has no structural form`);
    }
  }
  for (const [key, value] of Object.entries(s)) {
    if (DROPPED.has(key) || key === "anyOf" || key === "x-kubernetes-int-or-string") continue;
    switch (key) {
      case "const":
        out.enum = [value];
        break;
      case "properties":
        out.properties = Object.fromEntries(
          Object.entries(value as Record<string, JsonSchema>).map(([k, v]) => [k, convert(v)]),
        );
        break;
      case "items":
        out.items = convert(value as JsonSchema);
        break;
      case "patternProperties": {
        // A TypeBox Record: keys are checked by api/validate.ts, values by the schema.
        const [valueSchema] = Object.values(value as Record<string, JsonSchema>);
        out.additionalProperties = convert(valueSchema ?? {});
        break;
      }
      case "additionalProperties":
        // Structural schemas prune unknown fields; `false` is not allowed beside `properties`.
        if (typeof value === "object") out.additionalProperties = convert(value as JsonSchema);
        break;
      case "uniqueItems":
        // Not allowed by the API server; `x-kubernetes-list-type: set` says it instead.
        break;
      case "format":
        if (KUBERNETES_FORMATS.has(value as string)) out.format = value;
        break;
      case "type":
        if (out.type === undefined) out.type = value;
        break;
      default:
        out[key] = value;
    }
  }
  if (s.type === "object" && !s.properties && !s.patternProperties && !s.additionalProperties) {
    out["x-kubernetes-preserve-unknown-fields"] = true;
  }
  if (Object.keys(s).length === 0 || (s.type === undefined && !anyOf && !s.const)) {
    // Type.Unknown: keep whatever is there.
    if (out.type === undefined && !out["x-kubernetes-int-or-string"])
      out["x-kubernetes-preserve-unknown-fields"] = true;
  }
  return out;
}

function rootSchema(spec: TSchema, status?: TSchema): JsonSchema {
  const properties: JsonSchema = {
    apiVersion: { type: "string" },
    kind: { type: "string" },
    metadata: { type: "object" },
    spec: toStructural(spec),
  };
  if (status) properties.status = toStructural(status);
  return { type: "object", required: ["spec"], properties };
}

export interface CustomResourceDefinition {
  apiVersion: "apiextensions.k8s.io/v1";
  kind: "CustomResourceDefinition";
  metadata: { name: string; labels?: Record<string, string> };
  spec: JsonSchema;
}

function crd(options: {
  kind: string;
  plural: string;
  singular: string;
  shortNames: string[];
  schema: JsonSchema;
  status: boolean;
  columns: { name: string; type: string; jsonPath: string; description?: string; priority?: number }[];
}): CustomResourceDefinition {
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${options.plural}.${GROUP}`, labels: { "app.kubernetes.io/part-of": "hive" } },
    spec: {
      group: GROUP,
      scope: "Namespaced",
      names: {
        kind: options.kind,
        listKind: `${options.kind}List`,
        plural: options.plural,
        singular: options.singular,
        shortNames: options.shortNames,
        categories: ["hive"],
      },
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          schema: { openAPIV3Schema: options.schema },
          ...(options.status ? { subresources: { status: {} } } : {}),
          additionalPrinterColumns: [
            ...options.columns,
            { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
          ],
        },
      ],
    },
  };
}

export function hivePolicyCrd(): CustomResourceDefinition {
  return crd({
    kind: KIND_POLICY,
    plural: PLURAL_POLICY,
    singular: "hivepolicy",
    shortNames: ["hp", "hpol"],
    schema: rootSchema(HivePolicySpecSchema, HivePolicyStatusSchema),
    status: true,
    columns: [
      { name: "Traps", type: "integer", jsonPath: ".status.trapCount", description: "Traps in the policy" },
      {
        name: "Matched",
        type: "integer",
        jsonPath: ".status.matchedContainers",
        description: "Containers watched",
      },
      { name: "Ready", type: "string", jsonPath: '.status.conditions[?(@.type=="Ready")].status' },
      {
        name: "Reason",
        type: "string",
        jsonPath: '.status.conditions[?(@.type=="Ready")].reason',
        priority: 1,
      },
    ],
  });
}

export function hiveDataCrd(): CustomResourceDefinition {
  return crd({
    kind: KIND_DATA,
    plural: PLURAL_DATA,
    singular: "hivedata",
    shortNames: ["hd"],
    schema: rootSchema(HiveDataSpecSchema),
    status: false,
    columns: [
      { name: "Path", type: "string", jsonPath: ".metadata.annotations.path" },
      { name: "Pod", type: "string", jsonPath: ".metadata.annotations.pod_name" },
      { name: "Container", type: "string", jsonPath: ".metadata.annotations.container_name" },
      { name: "Inode", type: "string", jsonPath: ".spec.inode-no" },
      { name: "Node", type: "string", jsonPath: ".metadata.annotations.node_name", priority: 1 },
      { name: "Kernel", type: "string", jsonPath: ".spec.kernel-id", priority: 1 },
    ],
  });
}

/**
 * The report CRD of `format` for clusters that have none (Kyverno and Policy Reporter install the
 * PolicyReport one): Hive's part of the published schema, derived from api/report.ts. Not Hive's
 * group, so not Hive's label either: a later install of the published CRD takes it over unchanged.
 */
export function policyReportCrd(format: ReportFormat = "policyreport"): CustomResourceDefinition {
  const f = REPORT_FORMATS[format];
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${f.plural}.${f.group}` },
    spec: {
      group: f.group,
      scope: "Namespaced",
      names: {
        kind: f.kind,
        listKind: `${f.kind}List`,
        plural: f.plural,
        singular: f.singular,
        shortNames: [...f.shortNames],
      },
      versions: [
        {
          name: f.version,
          served: true,
          storage: true,
          schema: {
            openAPIV3Schema: {
              type: "object",
              properties: {
                apiVersion: { type: "string" },
                kind: { type: "string" },
                metadata: { type: "object" },
                summary: toStructural(ReportSummarySchema),
                results: { type: "array", items: toStructural(ReportResultSchema) },
              },
            },
          },
          additionalPrinterColumns: [
            ...(["pass", "fail", "warn", "error", "skip"] as const).map((r) => ({
              name: r[0]?.toUpperCase() + r.slice(1),
              type: "integer",
              jsonPath: `.summary.${r}`,
            })),
            { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
          ],
        },
      ],
    },
  };
}

export function hiveCrds(): CustomResourceDefinition[] {
  return [hivePolicyCrd(), hiveDataCrd()];
}

export { API_VERSION };
