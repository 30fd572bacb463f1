/**
 * The CRD's CEL rules (x-kubernetes-validations) run by an independent CEL implementation:
 * admission must never reject a HivePolicy that `hive validate` and the component accept
 * (api/validate.ts), and must reject the documented bad cases.
 */
import { evaluate } from "@marcbachmann/cel-js";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { hivePolicyCrd, validatePolicySpec } from "../../api/index.ts";
import { celName } from "../apiserver/structural.ts";

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

/** The schema node of each rule rides along, so that `self` gets CEL's view of that node. */
type PlacedRule = Rule & { node: Schema };

/** Rules below `node`; `at` names list items with `[]`: "allow[].exe" is the exe of every allow entry. */
function rulesOf(node: Schema, at: string): PlacedRule[] {
  const own = ((node["x-kubernetes-validations"] as Rule[] | undefined) ?? []).map((r) => ({
    ...r,
    at,
    node,
  }));
  const children = Object.entries((node.properties as Record<string, Schema> | undefined) ?? {}).flatMap(
    ([k, v]) => rulesOf(v, at ? `${at}.${k}` : k),
  );
  const items = node.type === "array" && node.items ? rulesOf(node.items as Schema, `${at}[]`) : [];
  return [...own, ...children, ...items];
}
const RULES = rulesOf(trapNode, "");

/** CEL's view of a JSON value: integers are int64, properties (not map keys) escaped. */
function cel(value: unknown, node: Schema): unknown {
  if (typeof value === "number" && Number.isInteger(value)) return BigInt(value);
  if (Array.isArray(value)) return value.map((v) => cel(v, (node.items as Schema | undefined) ?? {}));
  if (value !== null && typeof value === "object") {
    const properties = node.properties as Record<string, Schema> | undefined;
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) =>
        properties
          ? [celName(k), cel(v, properties[k] ?? {})]
          : [k, cel(v, (node.additionalProperties as Schema | undefined) ?? {})],
      ),
    );
  }
  return value;
}

/** Every value at `at` ("allow[].exe") inside `value`. */
function valuesAt(value: unknown, at: string): unknown[] {
  let found: unknown[] = [value];
  for (const step of at.split(/\.|(?=\[\])/).filter(Boolean)) {
    found = found.flatMap((v) => {
      if (step === "[]") return Array.isArray(v) ? v : [];
      const next = (v as Record<string, unknown> | undefined)?.[step];
      return next === undefined ? [] : [next];
    });
  }
  return found;
}

/**
 * Messages of the CEL rules a trap fails (rules on absent fields do not run, as in Kubernetes).
 * A rule whose evaluation fails (an invalid regular expression) refuses the object, as in Kubernetes.
 */
function admissionErrors(trap: Record<string, unknown>): string[] {
  const failed: string[] = [];
  for (const r of RULES) {
    for (const self of valuesAt(trap, r.at)) {
      let ok: unknown;
      try {
        ok = evaluate(r.rule, { self: cel(self, r.node) });
      } catch {
        ok = false;
      }
      if (ok !== true) failed.push(r.message);
    }
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
      fc.constantFrom(444, 644, 7777, 800, 8, 0, 4755, 666, 1644, 2),
      fc.constantFrom("0444", "444", "0999", "abc", "04444", "04755", "0666", "00644", "0002"),
    ),
    match: fc.record(
      { "container-name": fc.constantFrom("nginx|sidecar", "(a+)+", "app-.*", "(", "[a-", "a{2,3}") },
      { requiredKeys: [] },
    ),
    callback: fc.constantFrom("http://a.example/x", "https://b.example", "ftp://c.example", "mailto:x@y"),
    labels: fc.dictionary(
      fc.constantFrom("team", "example.com/team", "a.b-c_d", "Team", "-x", "x/", "a/b/c", "sev erity", "9x"),
      fc.constantFrom("payments", "", "a-b", "-bad"),
      { maxKeys: 3 },
    ),
    allow: fc.array(
      fc.record(
        {
          exe: fc.constantFrom(
            "/usr/sbin/sshd",
            "/usr/lib/openssh/*",
            "sshd",
            "/usr/*/sshd",
            "*",
            "/",
            "/a**",
          ),
          "parent-exe": fc.constantFrom("/usr/sbin/cron", "/usr/*", "cron", "/x*y", ""),
          accesses: fc.constantFrom(["read"], ["read", "write"], ["exec", "open", "append"]),
        },
        { requiredKeys: [] },
      ),
      { maxLength: 3 },
    ),
  },
  { requiredKeys: ["path"] },
);

describe("the HivePolicy CRD's CEL rules", () => {
  it("are found where the schema puts them", () => {
    expect(RULES.map((r) => r.at).sort()).toEqual([
      "",
      "allow[]",
      "allow[].exe",
      "allow[].exe",
      "allow[].parent-exe",
      "allow[].parent-exe",
      "callback",
      "labels",
      "match.container-name",
      "mode",
      "mode",
      "path",
      "path",
    ]);
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
    [
      { path: "/x", create: true, mode: 4755 },
      "mode must not set setuid, setgid, sticky or world-writable bits (such as 4755 or 0666); use a mode such as 0644 or 0444",
    ],
    [
      { path: "/x", create: true, mode: "0666" },
      "mode must not set setuid, setgid, sticky or world-writable bits (such as 4755 or 0666); use a mode such as 0644 or 0444",
    ],
    [
      { path: "/x", create: true, mode: "02644" },
      "mode must not set setuid, setgid, sticky or world-writable bits (such as 4755 or 0666); use a mode such as 0644 or 0444",
    ],
    [
      { path: "/x", match: { "container-name": "(" } },
      "container-name must be a regular expression RE2 accepts (no backreferences or lookaround)",
    ],
    [{ path: "/x", callback: "ftp://example.com" }, "callback must be an http(s) URL"],
    [{ path: "/etc/shadow", allow: [{ exe: "sshd" }] }, 'exe must be an absolute path (start with "/")'],
    [{ path: "/etc/shadow", allow: [{ exe: "/usr/*/sshd" }] }, 'exe may hold "*" only as its last character'],
    [
      { path: "/etc/shadow", allow: [{ exe: "/usr/sbin/sshd" }, { "parent-exe": "cron" }] },
      'parent-exe must be an absolute path (start with "/")',
    ],
    [
      { path: "/etc/shadow", allow: [{ "parent-exe": "/usr/sbin/cron*x" }] },
      'parent-exe may hold "*" only as its last character',
    ],
    [{ path: "/etc/shadow", allow: [{ accesses: ["read"] }] }, "an allow entry needs exe or parent-exe"],
    [{ path: "/etc/shadow", allow: [{}] }, "an allow entry needs exe or parent-exe"],
    [
      { path: "/etc/shadow", labels: { "team/a/b": "x" } },
      "labels keys must be label names such as team or example.com/team",
    ],
    [
      { path: "/etc/shadow", labels: { "-team": "x" } },
      "labels keys must be label names such as team or example.com/team",
    ],
  ])("reject %j at admission", (trap, message) => {
    expect(admissionErrors(trap)).toContain(message);
    expect(validatePolicySpec({ traps: [trap] }).ok).toBe(false);
  });

  it.each([
    [{ exe: "/usr/sbin/sshd" }],
    [{ "parent-exe": "/usr/sbin/cron" }],
    [{ exe: "/usr/lib/openssh/*", "parent-exe": "/usr/sbin/sshd*", accesses: ["read"] }],
  ])("admit the allow entry %j", (entry) => {
    const trap = { path: "/etc/shadow", allow: [entry] };
    expect(admissionErrors(trap)).toEqual([]);
    expect(validatePolicySpec({ traps: [trap] }).ok).toBe(true);
  });

  it("admit the trap labels Kubernetes accepts as label names", () => {
    const trap = { path: "/x", labels: { team: "payments", "example.com/owner": "sec-ops", "a.b_c": "" } };
    expect(admissionErrors(trap)).toEqual([]);
    expect(validatePolicySpec({ traps: [trap] }).ok).toBe(true);
  });

  it.each([644, "0644", 444, "0444", "00640", 5])("admit the mode %j", (mode) => {
    const trap = { path: "/x", create: true, mode };
    expect(admissionErrors(trap)).toEqual([]);
    expect(validatePolicySpec({ traps: [trap] }).ok).toBe(true);
  });

  it("refuse exactly the modes with a setuid, setgid, sticky or world-writable bit, however written", () => {
    for (let bits = 0; bits <= 0o7777; bits++) {
      const octal = bits.toString(8);
      for (const mode of [Number(octal), octal, `0${octal}`]) {
        const trap = { path: "/x", create: true, mode };
        const refused = admissionErrors(trap).length > 0;
        expect({ mode, refused }).toEqual({ mode, refused: (bits & 0o7002) !== 0 });
        expect(validatePolicySpec({ traps: [trap] }).ok).toBe(!refused);
      }
    }
  });

  it("admit a nested quantifier, which RE2 runs in linear time", () => {
    const trap = { path: "/x", match: { "container-name": "(a+)+" } };
    expect(admissionErrors(trap)).toEqual([]);
    expect(validatePolicySpec({ traps: [trap] }).ok).toBe(true);
  });

  it("bound the allow list and its paths, so that the API server can estimate the rules' cost", () => {
    const allow = (trapNode.properties as Record<string, Schema>).allow as Schema;
    const entry = allow.items as Schema;
    const props = entry.properties as Record<string, Schema>;
    expect(allow.maxItems).toBe(64);
    expect(props.exe?.maxLength).toBe(4096);
    expect(props["parent-exe"]?.maxLength).toBe(4096);
    expect((props.accesses as Schema).maxItems).toBe(5);
    expect((props.accesses as Schema)["x-kubernetes-list-type"]).toBe("set");
  });
});
