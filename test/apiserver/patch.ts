/**
 * The patch formats the API server accepts: JSON merge patch (RFC 7386), JSON patch
 * (RFC 6902), and strategic merge patch applied as a merge patch (the stand-in has no
 * per-field merge keys; lists are replaced, as merge patch does).
 */
import { errors } from "./status.ts";

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

function isObject(v: unknown): v is Record<string, Json> {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

export function mergePatch(target: unknown, patch: unknown): Json {
  if (!isObject(patch)) return structuredClone(patch as Json);
  const out: Record<string, Json> = isObject(target) ? { ...(target as Record<string, Json>) } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

function unescapePointer(token: string): string {
  return token.replace(/~1/g, "/").replace(/~0/g, "~");
}

function parsePointer(path: string): string[] {
  if (path === "") return [];
  if (!path.startsWith("/")) throw errors.badRequest(`json patch: invalid path "${path}"`);
  return path.slice(1).split("/").map(unescapePointer);
}

function getAt(doc: Json, tokens: string[]): Json | undefined {
  let cur: Json | undefined = doc;
  for (const t of tokens) {
    if (Array.isArray(cur)) cur = cur[Number(t)];
    else if (isObject(cur)) cur = Object.hasOwn(cur, t) ? cur[t] : undefined;
    else return undefined;
  }
  return cur;
}

function parentOf(doc: Json, tokens: string[], path: string): { parent: Json; key: string } {
  const parent = getAt(doc, tokens.slice(0, -1));
  if (parent === undefined || parent === null || typeof parent !== "object") {
    throw errors.invalid("Patch", "", "", [
      { reason: "FieldValueInvalid", message: `doc is missing path: "${path}"`, field: "patch" },
    ]);
  }
  return { parent, key: tokens[tokens.length - 1] ?? "" };
}

function missing(path: string): Error {
  return errors.invalid("Patch", "", "", [
    { reason: "FieldValueInvalid", message: `doc is missing path: "${path}": missing value`, field: "patch" },
  ]);
}

function add(doc: Json, path: string, value: Json): Json {
  const tokens = parsePointer(path);
  if (tokens.length === 0) return value;
  const { parent, key } = parentOf(doc, tokens, path);
  if (Array.isArray(parent)) {
    const idx = key === "-" ? parent.length : Number(key);
    if (!Number.isInteger(idx) || idx < 0 || idx > parent.length) throw missing(path);
    parent.splice(idx, 0, value);
  } else (parent as Record<string, Json>)[key] = value;
  return doc;
}

function remove(doc: Json, path: string): Json {
  const tokens = parsePointer(path);
  const { parent, key } = parentOf(doc, tokens, path);
  if (Array.isArray(parent)) {
    const idx = Number(key);
    if (!Number.isInteger(idx) || idx < 0 || idx >= parent.length) throw missing(path);
    parent.splice(idx, 1);
  } else {
    if (!Object.hasOwn(parent as object, key)) throw missing(path);
    delete (parent as Record<string, Json>)[key];
  }
  return doc;
}

export function jsonPatch(target: unknown, ops: unknown): Json {
  if (!Array.isArray(ops)) throw errors.badRequest("json patch: the body must be a JSON array of operations");
  let doc = structuredClone(target) as Json;
  for (const raw of ops) {
    if (!isObject(raw)) throw errors.badRequest("json patch: each operation must be an object");
    const op = raw.op;
    const path = typeof raw.path === "string" ? raw.path : undefined;
    if (path === undefined) throw errors.badRequest(`json patch: operation ${String(op)} has no path`);
    switch (op) {
      case "add":
        doc = add(doc, path, structuredClone(raw.value ?? null));
        break;
      case "remove":
        doc = remove(doc, path);
        break;
      case "replace":
        if (getAt(doc, parsePointer(path)) === undefined) throw missing(path);
        doc = add(remove(doc, path), path, structuredClone(raw.value ?? null));
        break;
      case "move":
      case "copy": {
        const from = typeof raw.from === "string" ? raw.from : "";
        const value = getAt(doc, parsePointer(from));
        if (value === undefined) throw missing(from);
        if (op === "move") doc = remove(doc, from);
        doc = add(doc, path, structuredClone(value));
        break;
      }
      case "test": {
        const value = getAt(doc, parsePointer(path));
        if (JSON.stringify(value) !== JSON.stringify(raw.value)) {
          throw errors.invalid("Patch", "", "", [
            {
              reason: "FieldValueInvalid",
              message: `testing value ${path} failed: test failed`,
              field: "patch",
            },
          ]);
        }
        break;
      }
      default:
        throw errors.badRequest(`json patch: unknown operation "${String(op)}"`);
    }
  }
  return doc;
}

export function applyPatch(contentType: string, target: unknown, patch: unknown): Json {
  const type = contentType.split(";")[0]?.trim() ?? "";
  if (type === "application/json-patch+json") return jsonPatch(target, patch);
  if (type === "application/merge-patch+json" || type === "application/strategic-merge-patch+json") {
    if (!isObject(patch)) throw errors.badRequest("merge patch: the body must be a JSON object");
    return mergePatch(target, patch);
  }
  throw errors.unsupportedMediaType(type);
}
