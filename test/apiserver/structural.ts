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
