/**
 * The CRD's CEL rules (x-kubernetes-validations) run by an independent CEL implementation:
 * admission must never reject a HivePolicy that `hive validate` and the component accept
 * (api/validate.ts), and must reject the documented bad cases.
 */
import { evaluate } from "@marcbachmann/cel-js";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { hivePolicyCrd, validatePolicySpec } from "../../api/index.ts";

type Schema = { [key: string]: unknown };
interface Rule {
  /** Where the rule sits, as a path below spec.traps[i]: "" (the trap), "path", "mode"… */
  at: string;
  rule: string;
  message: string;
}

const [version] = hivePolicyCrd().spec.versions as [{ schema: { openAPIV3Schema: Schema } }];
const trapSchema = ((version.schema.openAPIV3Schema.properties as Schema).spec as Schema)
  .properties as Schema;
const trapNode = (trapSchema.traps as Schema).items as Schema;

function rulesOf(node: Schema, at: string): Rule[] {
  const own = ((node["x-kubernetes-validations"] as Rule[] | undefined) ?? []).map((r) => ({ ...r, at }));
  const children = Object.entries((node.properties as Record<string, Schema> | undefined) ?? {}).flatMap(
    ([k, v]) => rulesOf(v, at ? `${at}.${k}` : k),
  );
  return [...own, ...children];
}
const RULES = rulesOf(trapNode, "");

/** CEL's view of a JSON value: integers are int64. */
function cel(value: unknown): unknown {
  if (typeof value === "number" && Number.isInteger(value)) return BigInt(value);
  if (Array.isArray(value)) return value.map(cel);
  if (value !== null && typeof value === "object")
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, cel(v)]));
  return value;
}

/** Messages of the CEL rules a trap fails (rules on absent fields do not run, as in Kubernetes). */
function admissionErrors(trap: Record<string, unknown>): string[] {
  const failed: string[] = [];
  for (const r of RULES) {
    const self =
      r.at === ""
        ? trap
        : r.at.split(".").reduce<unknown>((o, k) => (o as Record<string, unknown> | undefined)?.[k], trap);
    if (self === undefined) continue;
    if (evaluate(r.rule, { self: cel(self) }) !== true) failed.push(r.message);
  }
  return failed;
}

const trapArb = fc.record(
  {
    path: fc.oneof(
      fc.constantFrom("/etc/shadow", "/a/../b", "relative", "/x/..", "/..hidden", "/a/./b"),
      fc.array(fc.constantFrom("a", "..", ".", "etc", "b c"), { maxLength: 4 }).map((p) => `/${p.join("/")}`),
    ),
    create: fc.boolean(),
    mode: fc.oneof(
      fc.constantFrom(444, 644, 7777, 800, 8, 0),
      fc.constantFrom("0444", "444", "0999", "abc", "04444"),
    ),
    callback: fc.constantFrom("http://a.example/x", "https://b.example", "ftp://c.example", "mailto:x@y"),
  },
  { requiredKeys: ["path"] },
);

describe("the HivePolicy CRD's CEL rules", () => {
  it("are found where the schema puts them", () => {
    expect(RULES.map((r) => r.at).sort()).toEqual(["", "callback", "mode", "path", "path"]);
  });

  it("never reject a trap the shared validation accepts", () => {
    fc.assert(
      fc.property(trapArb, (trap) => {
        const valid = validatePolicySpec({ traps: [trap] }).ok;
        if (valid) expect(admissionErrors(trap)).toEqual([]);
      }),
      { numRuns: 500 },
    );
  });

  it.each([
    [{ path: "/a/../etc/shadow" }, "path must not contain '..' components"],
    [{ path: "/x", mode: 444 }, "mode only applies with create: true"],
    [{ path: "/x", create: true, mode: "0999" }, 'mode must be octal digits such as 444 or "0644"'],
    [{ path: "/x", callback: "ftp://example.com" }, "callback must be an http(s) URL"],
  ])("reject %j at admission", (trap, message) => {
    expect(admissionErrors(trap)).toContain(message);
    expect(validatePolicySpec({ traps: [trap] }).ok).toBe(false);
  });
});
