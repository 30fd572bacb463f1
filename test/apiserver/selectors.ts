/**
 * Label and field selectors with the grammar and semantics of k8s.io/apimachinery:
 * labels: `k`, `!k`, `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)` joined by commas
 * (AND); `!=` and `notin` also match objects without the key. Fields: `f=v`, `f==v`, `f!=v`.
 */
import { errors } from "./status.ts";

export type LabelRequirement =
  | { op: "exists" | "!exists"; key: string }
  | { op: "in" | "notin"; key: string; values: string[] }
  | { op: "=" | "!="; key: string; value: string };

export type LabelSelector = LabelRequirement[];

const KEY =
  /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$/;

/** Split on commas that are not inside parentheses. */
function splitTerms(s: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let cur = "";
  for (const ch of s) {
    if (ch === "(") depth++;
    if (ch === ")") depth--;
    if (ch === "," && depth === 0) {
      out.push(cur);
      cur = "";
    } else cur += ch;
  }
  out.push(cur);
  return out;
}

function checkKey(key: string, whole: string): string {
  if (!KEY.test(key))
    throw errors.badRequest(`unable to parse requirement: invalid label key "${key}" in "${whole}"`);
  return key;
}

function checkValue(value: string, whole: string): string {
  if (!VALUE.test(value) || value.length > 63) {
    throw errors.badRequest(`unable to parse requirement: invalid label value: "${value}" in "${whole}"`);
  }
  return value;
}

export function parseLabelSelector(raw: string | null | undefined): LabelSelector {
  if (!raw || raw.trim() === "") return [];
  const reqs: LabelSelector = [];
  for (const termRaw of splitTerms(raw)) {
    const term = termRaw.trim();
    if (term === "")
      throw errors.badRequest(`unable to parse requirement: empty term in label selector "${raw}"`);
    const setMatch = /^(\S+)\s+(in|notin)\s*\(([^)]*)\)$/.exec(term);
    if (setMatch) {
      const [, key = "", op, list = ""] = setMatch;
      const values = list.split(",").map((v) => checkValue(v.trim(), raw));
      reqs.push({ op: op === "in" ? "in" : "notin", key: checkKey(key, raw), values });
      continue;
    }
    const cmp = /^([^=!\s]+)\s*(==|=|!=)\s*(.*)$/.exec(term);
    if (cmp) {
      const [, key = "", op, value = ""] = cmp;
      reqs.push({
        op: op === "!=" ? "!=" : "=",
        key: checkKey(key, raw),
        value: checkValue(value.trim(), raw),
      });
      continue;
    }
    if (term.startsWith("!")) {
      reqs.push({ op: "!exists", key: checkKey(term.slice(1).trim(), raw) });
      continue;
    }
    reqs.push({ op: "exists", key: checkKey(term, raw) });
  }
  return reqs;
}

export function matchesLabels(sel: LabelSelector, labels: Record<string, string> | undefined): boolean {
  const l = labels ?? {};
  for (const r of sel) {
    const has = Object.hasOwn(l, r.key);
    const v = l[r.key];
    switch (r.op) {
      case "exists":
        if (!has) return false;
        break;
      case "!exists":
        if (has) return false;
        break;
      case "=":
        if (!has || v !== r.value) return false;
        break;
      case "!=":
        if (has && v === r.value) return false;
        break;
      case "in":
        if (!has || !r.values.includes(v as string)) return false;
        break;
      case "notin":
        if (has && r.values.includes(v as string)) return false;
        break;
    }
  }
  return true;
}

export interface FieldRequirement {
  field: string;
  op: "=" | "!=";
  value: string;
}

export function parseFieldSelector(
  raw: string | null | undefined,
  supported: readonly string[],
): FieldRequirement[] {
  if (!raw || raw.trim() === "") return [];
  const out: FieldRequirement[] = [];
  for (const termRaw of raw.split(",")) {
    const term = termRaw.trim();
    const m = /^([^=!]+)(==|=|!=)(.*)$/.exec(term);
    if (!m) throw errors.badRequest(`invalid selector: '${raw}'; can't understand '${term}'`);
    const [, field = "", op, value = ""] = m;
    if (!supported.includes(field)) {
      throw errors.badRequest(`field label not supported: ${field}`);
    }
    out.push({ field, op: op === "!=" ? "!=" : "=", value });
  }
  return out;
}

/** Reads a dotted field path (`spec.nodeName`) as the string Kubernetes compares; missing → "". */
export function fieldValue(obj: unknown, path: string): string {
  let cur: unknown = obj;
  for (const part of path.split(".")) {
    if (cur === null || typeof cur !== "object") return "";
    cur = (cur as Record<string, unknown>)[part];
  }
  if (cur === undefined || cur === null) return "";
  return String(cur);
}

export function matchesFields(reqs: readonly FieldRequirement[], obj: unknown): boolean {
  for (const r of reqs) {
    const v = fieldValue(obj, r.field);
    if (r.op === "=" ? v !== r.value : v === r.value) return false;
  }
  return true;
}
