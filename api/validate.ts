/**
 * Runtime validation derived from the schemas, with messages that name the offending
 * field the way a Kubernetes user reads it: `spec.traps[0].match.ip: must be an IPv4
 * address such as 10.0.0.7`. Rules the schema language cannot say (the CRD says them in
 * CEL) are checked here too, so `hive validate`, the component and admission agree.
 */
import type { TSchema } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";
import { type Alert, AlertSchema } from "./alert.ts";
import { type HiveData, HiveDataSchema } from "./data.ts";
import {
  type AllowEntry,
  DENY_WITH_ALLOW,
  type HivePolicy,
  HivePolicySchema,
  type HivePolicySpec,
  HivePolicySpecSchema,
  type HiveTrap,
  LABEL_KEY_PATTERN,
  MAX_DENY_ALLOW_ENTRIES,
  modeProblem,
  OCTAL_MODE,
} from "./policy.ts";

export interface FieldError {
  /** The field, as `spec.traps[0].path`. */
  field: string;
  message: string;
}

export type Validation<T> = { ok: true; value: T } | { ok: false; errors: FieldError[] };

/** `/spec/traps/0/container-name` → `spec.traps[0].container-name`. */
export function fieldName(pointer: string, prefix = ""): string {
  let out = prefix;
  for (const raw of pointer.split("/").slice(1)) {
    const part = raw.replaceAll("~1", "/").replaceAll("~0", "~");
    if (/^\d+$/.test(part)) out += `[${part}]`;
    else out += out === "" ? part : `.${part}`;
  }
  return out === "" ? "(document)" : out;
}

function describe(error: { schema: TSchema; message: string; value: unknown; path: string }): string {
  const custom = (error.schema as { errorMessage?: unknown }).errorMessage;
  if (error.message.startsWith("Unexpected property")) return "is not a known field";
  if (error.value === undefined && error.message.startsWith("Expected required property"))
    return "is required";
  if (typeof custom === "string") return custom;
  return error.message.charAt(0).toLowerCase() + error.message.slice(1);
}

function schemaErrors(schema: TSchema, value: unknown, prefix: string): FieldError[] {
  const seen = new Set<string>();
  const errors: FieldError[] = [];
  for (const error of Value.Errors(schema, value)) {
    const field = fieldName(error.path, prefix);
    // One message per field: a union or a string with several constraints reports
    // several failures for the same value; the first names the cause.
    if ([...seen].some((s) => field === s || field.startsWith(`${s}.`) || field.startsWith(`${s}[`)))
      continue;
    seen.add(field);
    errors.push({ field, message: describe(error) });
  }
  return errors;
}

const LABEL_KEY = new RegExp(LABEL_KEY_PATTERN);

/**
 * The rules the CRD states in CEL (see api/policy.ts), checked for callers outside
 * admission. They look only at traps whose fields have the right types, so they run beside
 * the schema's errors and a user sees every problem at once.
 */
function specRules(spec: unknown, prefix: string): FieldError[] {
  const errors: FieldError[] = [];
  const traps = (spec as { traps?: unknown } | undefined)?.traps;
  if (!Array.isArray(traps)) return errors;
  traps.forEach((trap: Partial<HiveTrap> | null, i) => {
    if (trap === null || typeof trap !== "object") return;
    const at = `${prefix}traps[${i}]`;
    if (typeof trap.path === "string") {
      if (trap.path.split("/").includes("..")) {
        errors.push({ field: `${at}.path`, message: "must not contain '..' components" });
      }
      if (trap.path.includes("\0"))
        errors.push({ field: `${at}.path`, message: "must not contain NUL characters" });
    }
    const octal =
      (typeof trap.mode === "number" || typeof trap.mode === "string") &&
      new RegExp(OCTAL_MODE).test(String(trap.mode));
    if (typeof trap.mode === "number" && !octal) {
      errors.push({ field: `${at}.mode`, message: 'must be an octal permission mode such as 444 or "0644"' });
    }
    const problem = octal ? modeProblem(Number.parseInt(String(trap.mode), 8)) : undefined;
    if (problem !== undefined) errors.push({ field: `${at}.mode`, message: problem });
    if (trap.mode !== undefined && trap.create !== true) {
      errors.push({ field: `${at}.mode`, message: "only applies with create: true" });
    }
    if (trap.dryRun !== undefined && trap.action !== "deny")
      errors.push({ field: `${at}.dryRun`, message: "only applies with action: deny" });
    if (trap.action === "deny" && Array.isArray(trap.allow) && !kernelDecides(trap.allow))
      errors.push({ field: `${at}.allow`, message: DENY_WITH_ALLOW });
    if (trap.labels !== null && typeof trap.labels === "object" && !Array.isArray(trap.labels)) {
      // The schema checks the values; a Record's keys only the CRD's CEL rule and this check see.
      for (const key of Object.keys(trap.labels)) {
        if (!LABEL_KEY.test(key))
          errors.push({
            field: `${at}.labels.${key}`,
            message: "is not a label name (such as team or example.com/team)",
          });
      }
    }
    if (Array.isArray(trap.allow)) {
      trap.allow.forEach((entry: unknown, j) => {
        if (entry === null || typeof entry !== "object" || Array.isArray(entry)) return;
        const { exe, "parent-exe": parentExe } = entry as Record<string, unknown>;
        if (exe === undefined && parentExe === undefined) {
          // An entry of `accesses` alone would allow every process: it says nothing about who reads.
          errors.push({ field: `${at}.allow[${j}]`, message: "needs exe or parent-exe" });
        }
      });
    }
  });
  return errors;
}

function merge(schema: FieldError[], rules: FieldError[]): FieldError[] {
  const fields = new Set(schema.map((e) => e.field));
  return [...schema, ...rules.filter((e) => !fields.has(e.field))];
}

export function validatePolicySpec(value: unknown, prefix = "spec."): Validation<HivePolicySpec> {
  const errors = merge(
    schemaErrors(HivePolicySpecSchema, value, prefix.replace(/\.$/, "")),
    specRules(value, prefix),
  );
  return errors.length > 0 ? { ok: false, errors } : { ok: true, value: value as HivePolicySpec };
}

export function validatePolicy(value: unknown): Validation<HivePolicy> {
  const spec = (value as { spec?: unknown } | null)?.spec;
  const errors = merge(schemaErrors(HivePolicySchema, value, ""), specRules(spec, "spec."));
  return errors.length > 0 ? { ok: false, errors } : { ok: true, value: value as HivePolicy };
}

export function validateData(value: unknown): Validation<HiveData> {
  const errors = schemaErrors(HiveDataSchema, value, "");
  return errors.length > 0 ? { ok: false, errors } : { ok: true, value: value as HiveData };
}

export function validateAlert(value: unknown): Validation<Alert> {
  const errors = schemaErrors(AlertSchema, value, "");
  return errors.length > 0 ? { ok: false, errors } : { ok: true, value: value as Alert };
}

/** One line per problem, as `hive validate` and the component print them. */
export function formatErrors(errors: readonly FieldError[], context = ""): string {
  const where = context ? `${context}: ` : "";
  return errors.map((e) => `${where}${e.field}: ${e.message}`).join("\n");
}

/** True when the kernel decides every entry (exact paths, at most MAX_DENY_ALLOW_ENTRIES): a denying trap's list. */
function kernelDecides(allow: readonly unknown[]): boolean {
  const exact = (v: unknown) => typeof v !== "string" || !v.endsWith("*");
  return (
    allow.length <= MAX_DENY_ALLOW_ENTRIES &&
    allow.every(
      (e) =>
        typeof e !== "object" ||
        e === null ||
        (exact((e as AllowEntry).exe) && exact((e as AllowEntry)["parent-exe"])),
    )
  );
}
