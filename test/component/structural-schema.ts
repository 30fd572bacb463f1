/**
 * A checker for the rules the API server applies to a CRD's `openAPIV3Schema`
 * (apiextensions.k8s.io/v1 "structural schema" and its v1-only restrictions), so a schema it
 * would reject fails here first, offline. Returns every violation as `path: rule`; empty when
 * valid. structural-schema.test.ts holds each rule against a real kube-apiserver.
 *
 * Rules checked:
 *  - the root is `type: object` and has no `additionalProperties`;
 *  - a non-empty `type` on the root, every property, every additionalProperties and every items
 *    node, except under x-kubernetes-int-or-string or x-kubernetes-preserve-unknown-fields;
 *  - `type` one of array, boolean, integer, number, object, string; enum values of that type;
 *  - `properties` and `additionalProperties` (even `false`) not both;
 *  - no `$ref`, `definitions`, `id`, `$schema`, `dependencies`, `additionalItems`, `patternProperties`,
 *    `const` (not part of JSONSchemaProps: strict decoding refuses it, lenient decoding drops it),
 *    `uniqueItems: true`, `items` as a list;
 *  - inside allOf/anyOf/oneOf/not: no `type`, `description`, `default`, `additionalProperties`,
 *    `nullable`, except the two x-kubernetes-int-or-string forms (anyOf [{type: integer},
 *    {type: string}], optionally in allOf). A property a junctor names need not be specified
 *    outside it, and an x-kubernetes-int-or-string node may carry a type: kube-apiserver 1.37
 *    accepts both (and serves such a CRD as structural);
 *  - x-kubernetes-list-type: atomic|set|map on arrays only; set items are scalars; map items are
 *    objects whose x-kubernetes-list-map-keys are scalar required properties;
 *  - x-kubernetes-map-type: granular|atomic on objects only;
 *  - x-kubernetes-validations: non-empty `rule` strings, single-line messages;
 *  - metadata at the root may only restrict `name` and `generateName`;
 *  - `pattern` compiles.
 */
type Schema = Record<string, unknown>;

const TYPES = new Set(["array", "boolean", "integer", "number", "object", "string"]);
const FORBIDDEN = [
  "$ref",
  "definitions",
  "id",
  "$schema",
  "dependencies",
  "additionalItems",
  "patternProperties",
  "const",
];
const JUNCTORS = ["allOf", "anyOf", "oneOf", "not"] as const;
const NOT_IN_JUNCTORS = ["type", "description", "default", "additionalProperties", "nullable"];

function isObject(value: unknown): value is Schema {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

function isIntOrStringForm(anyOf: unknown): boolean {
  return (
    Array.isArray(anyOf) &&
    anyOf.length === 2 &&
    JSON.stringify(anyOf[0]) === '{"type":"integer"}' &&
    JSON.stringify(anyOf[1]) === '{"type":"string"}'
  );
}

function matchesType(value: unknown, type: string): boolean {
  switch (type) {
    case "string":
      return typeof value === "string";
    case "integer":
      return Number.isInteger(value);
    case "number":
      return typeof value === "number";
    case "boolean":
      return typeof value === "boolean";
    case "array":
      return Array.isArray(value);
    case "object":
      return isObject(value);
    default:
      return false;
  }
}

/** What a junctor branch may not say; nested properties and items are value validations too. */
function checkJunctor(branch: Schema, path: string, errors: string[], intOrString: boolean): void {
  for (const key of NOT_IN_JUNCTORS) {
    if (key in branch && !(key === "type" && intOrString)) {
      errors.push(`${path}: "${key}" is not allowed inside allOf/anyOf/oneOf/not`);
    }
  }
  if (isObject(branch.properties)) {
    for (const [name, sub] of Object.entries(branch.properties))
      if (isObject(sub)) checkJunctor(sub, `${path}.properties.${name}`, errors, false);
  }
  if (isObject(branch.items)) checkJunctor(branch.items, `${path}.items`, errors, false);
  for (const j of JUNCTORS) {
    const nested = branch[j];
    for (const b of Array.isArray(nested) ? nested : nested === undefined ? [] : [nested]) {
      if (isObject(b)) checkJunctor(b, `${path}.${j}`, errors, intOrString);
    }
  }
}

function checkNode(s: unknown, path: string, errors: string[], needsType: boolean): void {
  if (!isObject(s)) {
    errors.push(`${path}: must be a schema object`);
    return;
  }
  const intOrString = s["x-kubernetes-int-or-string"] === true;
  const preserve = s["x-kubernetes-preserve-unknown-fields"] === true;
  const type = s.type;

  if (type !== undefined && (typeof type !== "string" || !TYPES.has(type)))
    errors.push(`${path}: type ${JSON.stringify(type)} is not a Kubernetes type`);
  if (needsType && (typeof type !== "string" || type === "") && !intOrString && !preserve)
    errors.push(`${path}: must specify a type`);
  if ("x-kubernetes-preserve-unknown-fields" in s && !preserve)
    errors.push(`${path}: x-kubernetes-preserve-unknown-fields must be true if set`);
  for (const key of FORBIDDEN) if (key in s) errors.push(`${path}: "${key}" is not allowed in a CRD schema`);
  if (s.uniqueItems === true)
    errors.push(`${path}: uniqueItems cannot be true (use x-kubernetes-list-type: set)`);
  if ("properties" in s && "additionalProperties" in s)
    errors.push(`${path}: properties and additionalProperties are mutually exclusive`);
  if (Array.isArray(s.items)) errors.push(`${path}: items must be one schema, not a list`);
  if (typeof s.pattern === "string") {
    try {
      new RegExp(s.pattern);
    } catch {
      errors.push(`${path}: pattern does not compile`);
    }
  }
  if (Array.isArray(s.enum) && typeof type === "string") {
    for (const v of s.enum)
      if (!matchesType(v, type))
        errors.push(`${path}: enum value ${JSON.stringify(v)} is not of type ${type}`);
  }

  // Logical junctors: only value validations, only on fields specified outside.
  for (const j of JUNCTORS) {
    const value = s[j];
    if (value === undefined) continue;
    if (intOrString && j === "anyOf" && isIntOrStringForm(value)) continue;
    if (
      intOrString &&
      j === "allOf" &&
      Array.isArray(value) &&
      value.some((b) => isObject(b) && isIntOrStringForm(b.anyOf))
    ) {
      for (const b of value)
        if (isObject(b) && !isIntOrStringForm(b.anyOf)) checkJunctor(b, `${path}.allOf`, errors, false);
      continue;
    }
    for (const b of Array.isArray(value) ? value : [value]) {
      if (isObject(b)) checkJunctor(b, `${path}.${j}`, errors, false);
      else errors.push(`${path}.${j}: must hold schema objects`);
    }
  }

  const listType = s["x-kubernetes-list-type"];
  if (listType !== undefined) {
    if (type !== "array") errors.push(`${path}: x-kubernetes-list-type needs type: array`);
    if (!["atomic", "set", "map"].includes(listType as string))
      errors.push(`${path}: x-kubernetes-list-type must be atomic, set or map`);
    const items = isObject(s.items) ? s.items : {};
    if (listType === "set" && (items.type === "object" || items.type === "array"))
      errors.push(`${path}: a set's items must be scalars`);
    if (listType === "map") {
      const keys = s["x-kubernetes-list-map-keys"];
      const props = isObject(items.properties) ? items.properties : {};
      const required = Array.isArray(items.required) ? items.required : [];
      if (items.type !== "object") errors.push(`${path}: a map list's items must be objects`);
      if (!Array.isArray(keys) || keys.length === 0)
        errors.push(`${path}: a map list needs x-kubernetes-list-map-keys`);
      for (const k of Array.isArray(keys) ? keys : []) {
        const prop = props[k as string];
        if (!isObject(prop)) errors.push(`${path}: map key ${k} is not a property of the items`);
        else if (prop.type === "object" || prop.type === "array")
          errors.push(`${path}: map key ${k} must be a scalar`);
        if (!required.includes(k) && !(isObject(prop) && "default" in prop))
          errors.push(`${path}: map key ${k} must be required or defaulted`);
      }
    }
  } else if ("x-kubernetes-list-map-keys" in s) {
    errors.push(`${path}: x-kubernetes-list-map-keys needs x-kubernetes-list-type: map`);
  }
  const mapType = s["x-kubernetes-map-type"];
  if (mapType !== undefined) {
    if (type !== "object") errors.push(`${path}: x-kubernetes-map-type needs type: object`);
    if (!["granular", "atomic"].includes(mapType as string))
      errors.push(`${path}: x-kubernetes-map-type must be granular or atomic`);
  }
  const rules = s["x-kubernetes-validations"];
  if (rules !== undefined) {
    if (!Array.isArray(rules)) errors.push(`${path}: x-kubernetes-validations must be a list`);
    for (const [i, r] of (Array.isArray(rules) ? rules : []).entries()) {
      if (!isObject(r) || typeof r.rule !== "string" || r.rule.trim() === "")
        errors.push(`${path}: x-kubernetes-validations[${i}] needs a rule`);
      else if (r.message !== undefined && (typeof r.message !== "string" || /[\r\n]/.test(r.message))) {
        errors.push(`${path}: x-kubernetes-validations[${i}].message must be one line`);
      }
    }
  }

  if (isObject(s.properties)) {
    for (const [name, sub] of Object.entries(s.properties))
      checkNode(sub, `${path}.properties.${name}`, errors, true);
  }
  if (isObject(s.additionalProperties))
    checkNode(s.additionalProperties, `${path}.additionalProperties`, errors, true);
  if (isObject(s.items)) checkNode(s.items, `${path}.items`, errors, true);
}

/** Violations of the structural-schema rules in a CRD version's openAPIV3Schema. */
export function structuralViolations(schema: unknown, path = "openAPIV3Schema"): string[] {
  const errors: string[] = [];
  checkNode(schema, path, errors, true);
  if (isObject(schema) && schema.type !== "object") errors.push(`${path}: the root must be type: object`);
  if (isObject(schema) && "additionalProperties" in schema)
    errors.push(`${path}: additionalProperties must not be used at the root`);
  if (isObject(schema) && isObject(schema.properties) && isObject(schema.properties.metadata)) {
    const meta = schema.properties.metadata;
    const allowed = new Set(["type", "properties", "description"]);
    for (const key of Object.keys(meta))
      if (!allowed.has(key))
        errors.push(
          `${path}.properties.metadata: only name and generateName may be restricted (found ${key})`,
        );
    if (isObject(meta.properties)) {
      for (const key of Object.keys(meta.properties)) {
        if (key !== "name" && key !== "generateName")
          errors.push(
            `${path}.properties.metadata: only name and generateName may be restricted (found ${key})`,
          );
      }
    }
  }
  return errors;
}
