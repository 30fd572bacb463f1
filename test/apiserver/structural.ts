/**
 * What kube-apiserver does to a custom resource with a structural schema before it
 * validates it: prune fields the schema does not declare (unless
 * `x-kubernetes-preserve-unknown-fields`), and fill in `default` values of missing fields.
 * Controllers that write a field the CRD lacks see it vanish here exactly as in a cluster.
 */

type Schema = Record<string, unknown>;

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

/** Returns a pruned, defaulted copy of `value` under `schema`. */
export function pruneAndDefault(value: unknown, schema: unknown): unknown {
  if (!isObject(schema)) return value;
  const s = schema as Schema;
  if (Array.isArray(value)) {
    return s.items === undefined ? value : value.map((v) => pruneAndDefault(v, s.items));
  }
  if (!isObject(value)) return value;
  const properties = isObject(s.properties) ? (s.properties as Record<string, Schema>) : undefined;
  const additional = s.additionalProperties;
  const preserve = s["x-kubernetes-preserve-unknown-fields"] === true;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    const propSchema = properties?.[k];
    if (propSchema !== undefined) out[k] = pruneAndDefault(v, propSchema);
    else if (isObject(additional)) out[k] = pruneAndDefault(v, additional);
    // Unknown field: kept only where the schema says so (or says nothing about objects at all).
    else if (preserve || additional === true || (properties === undefined && s.type !== "object")) out[k] = v;
  }
  for (const [k, propSchema] of Object.entries(properties ?? {})) {
    if (out[k] === undefined && isObject(propSchema) && propSchema.default !== undefined) {
      out[k] = pruneAndDefault(structuredClone(propSchema.default), propSchema);
    }
  }
  return out;
}

/**
 * Applies the CRD's schema to a whole object. `metadata`, `apiVersion` and `kind` are the
 * server's own, never pruned by the CRD schema.
 */
export function pruneObject<T extends Record<string, unknown>>(obj: T, schema: unknown): T {
  const { metadata, apiVersion, kind, ...rest } = obj;
  const pruned = pruneAndDefault(rest, schema) as Record<string, unknown>;
  delete pruned.metadata;
  delete pruned.apiVersion;
  delete pruned.kind;
  return { ...pruned, metadata, apiVersion, kind } as unknown as T;
}

export interface CelFailure {
  field: string;
  message: string;
}

const CEL_RESERVED = new Set(
  "true false null in as break const continue else for function if import let loop package namespace return var void while".split(
    " ",
  ),
);

/** How kube-apiserver names a schema property in CEL: `parent-exe` is `parent__dash__exe`. */
export function celName(name: string): string {
  if (CEL_RESERVED.has(name)) return `__${name}__`;
  return name
    .replaceAll("__", "__underscores__")
    .replaceAll(".", "__dot__")
    .replaceAll("-", "__dash__")
    .replaceAll("/", "__slash__");
}

/**
 * CEL's view of a JSON value: integers are int64 (BigInt in cel-js); an object's declared
 * properties are escaped as kube-apiserver escapes them, map keys (additionalProperties) are not.
 */
function celValue(value: unknown, schema: unknown): unknown {
  const s = isObject(schema) ? (schema as Schema) : {};
  if (typeof value === "number" && Number.isInteger(value)) return BigInt(value);
  if (Array.isArray(value)) return value.map((v) => celValue(v, s.items));
  if (isObject(value)) {
    const properties = isObject(s.properties) ? (s.properties as Record<string, Schema>) : undefined;
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) =>
        properties ? [celName(k), celValue(v, properties[k])] : [k, celValue(v, s.additionalProperties)],
      ),
    );
  }
  return value;
}

const compiled = new Map<string, (ctx: Record<string, unknown>) => unknown>();

/**
 * Runs the schema's `x-kubernetes-validations` rules (CEL) against `value`, as kube-apiserver
 * does: a rule runs only where its field is present, with `self` bound to that field.
 * Transition rules (those using `oldSelf`) are not evaluated.
 */
export function celFailures(
  value: unknown,
  schema: unknown,
  evaluate: (expr: string) => (ctx: Record<string, unknown>) => unknown,
  path = "",
): CelFailure[] {
  if (!isObject(schema) || value === undefined) return [];
  const s = schema as Schema;
  const out: CelFailure[] = [];
  const rules = Array.isArray(s["x-kubernetes-validations"])
    ? (s["x-kubernetes-validations"] as Schema[])
    : [];
  for (const r of rules) {
    const rule = typeof r.rule === "string" ? r.rule : "";
    if (rule === "" || rule.includes("oldSelf")) continue;
    let fn = compiled.get(rule);
    if (!fn) {
      fn = evaluate(rule);
      compiled.set(rule, fn);
    }
    let ok: unknown;
    try {
      ok = fn({ self: celValue(value, s) });
    } catch (err) {
      ok = `${(err as Error).message}`;
    }
    if (ok !== true) {
      const message = typeof r.message === "string" ? r.message : `failed rule: ${rule}`;
      out.push({ field: path || "<root>", message: typeof ok === "string" ? `${message} (${ok})` : message });
    }
  }
  if (Array.isArray(value)) {
    value.forEach((v, i) => {
      out.push(...celFailures(v, s.items, evaluate, `${path}[${i}]`));
    });
  } else if (isObject(value)) {
    const properties = isObject(s.properties) ? (s.properties as Record<string, Schema>) : {};
    for (const [k, v] of Object.entries(value)) {
      const child = properties[k] ?? (isObject(s.additionalProperties) ? s.additionalProperties : undefined);
      if (child) out.push(...celFailures(v, child, evaluate, path ? `${path}.${k}` : k));
    }
  }
  return out;
}
