/**
 * The CRD's schema and CEL rules (x-kubernetes-validations) as a real kube-apiserver runs them:
 * HivePolicies are created (server-side dry run) through the real API with Hive's CRDs applied.
 * Admission must never reject a HivePolicy that `hive validate` and the component accept
 * (api/validate.ts), and must reject the documented bad cases, naming the field.
 */
import { CustomObjectsApi } from "@kubernetes/client-node";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DENY_WITH_ALLOW, hiveCrds, hivePolicyCrd, validatePolicySpec } from "../../api/index.ts";
import type { KubernetesObject } from "../../component/index.ts";
import { applyObjects } from "../cluster/install.ts";
import { runKubectl } from "../cluster/kubectl-run.ts";
import { type RealApi, startRealApi } from "../cluster/real-api.ts";
import { statusOf } from "../cluster/testing.ts";

type Schema = { [key: string]: unknown };
interface Rule {
  /** Where the rule sits, as a path below spec.traps[i]: "" (the trap), "path", "mode"… */
  at: string;
  rule: string;
  message: string;
}
interface Cause {
  field: string;
  message: string;
}

const trapNodeOf = (crd: ReturnType<typeof hivePolicyCrd>) => {
  const [version] = crd.spec.versions as [{ schema: { openAPIV3Schema: Schema } }];
  const spec = (version.schema.openAPIV3Schema.properties as Schema).spec as Schema;
  return ((spec.properties as Schema).traps as Schema).items as Schema;
};
const trapNode = trapNodeOf(hivePolicyCrd());

/** Rules below `node`; `at` names list items with `[]`: "allow[].exe" is the exe of every allow entry. */
function rulesOf(node: Schema, at: string): Rule[] {
  const own = ((node["x-kubernetes-validations"] as Rule[] | undefined) ?? []).map((r) => ({ ...r, at }));
  const children = Object.entries((node.properties as Record<string, Schema> | undefined) ?? {}).flatMap(
    ([k, v]) => rulesOf(v, at ? `${at}.${k}` : k),
  );
  const items = node.type === "array" && node.items ? rulesOf(node.items as Schema, `${at}[]`) : [];
  return [...own, ...children, ...items];
}
const RULES = rulesOf(trapNode, "");

let api: RealApi;
let custom: CustomObjectsApi;

beforeAll(async () => {
  api = await startRealApi({ controllerManager: false });
  applyObjects(api.cp, hiveCrds() as unknown as KubernetesObject[]);
  custom = api.kubeConfig().makeApiClient(CustomObjectsApi);
});
afterAll(async () => {
  await api?.stop();
});

/**
 * What the real server says of a HivePolicy holding `traps`: [] when it admits it, else the
 * causes of its 422 (every failed schema constraint and CEL rule, each with its field). A dry
 * run: the server validates and admits as for a create, and stores nothing.
 */
async function admissionCauses(traps: unknown[]): Promise<Cause[]> {
  try {
    await custom.createNamespacedCustomObject({
      group: "hive-operator.com",
      version: "v1alpha1",
      plural: "hivepolicies",
      namespace: "default",
      dryRun: "All",
      body: {
        apiVersion: "hive-operator.com/v1alpha1",
        kind: "HivePolicy",
        metadata: { generateName: "cel-" },
        spec: { traps },
      },
    });
    return [];
  } catch (err) {
    const status = statusOf(err);
    if (status.code !== 422) throw err;
    return ((status.details?.causes ?? []) as Cause[]).map(({ field, message }) => ({ field, message }));
  }
}

const admissionErrors = async (trap: unknown) =>
  (await admissionCauses([trap])).map((c) => `${c.field}: ${c.message}`);

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
    action: fc.constantFrom("alert", "deny", "block"),
    dryRun: fc.boolean(),
  },
  { requiredKeys: ["path"] },
);

const UNSAFE_MODE =
  "mode must not set setuid, setgid, sticky or world-writable bits (such as 4755 or 0666); use a mode such as 0644 or 0444";
const EXE_PATTERN_MESSAGE = "in body should match '^/[^*]*[*]?$'";

/** Documented bad traps: the field the server names, and what its cause says. */
const REFUSED: [Record<string, unknown>, string, string][] = [
  [{ path: "relative" }, "path", 'path must be absolute (start with "/")'],
  [{ path: "/a/../etc/shadow" }, "path", "path must not contain '..' components"],
  [{ path: "/etc/.." }, "path", "path must not contain '..' components"],
  [{ path: "/x", mode: 444 }, "", "mode only applies with create: true"],
  [{ path: "/x", dryRun: true }, "", "dryRun only applies with action: deny"],
  [{ path: "/x", action: "alert", dryRun: false }, "", "dryRun only applies with action: deny"],
  [{ path: "/x", action: "deny", allow: [{ exe: "/usr/sbin/*" }] }, "", DENY_WITH_ALLOW],
  [{ path: "/x", action: "deny", allow: [{ exe: "/a" }, { "parent-exe": "/usr/*" }] }, "", DENY_WITH_ALLOW],
  [
    { path: "/x", action: "deny", allow: Array.from({ length: 33 }, (_, i) => ({ exe: `/bin/p${i}` })) },
    "",
    DENY_WITH_ALLOW,
  ],
  [{ path: "/x", create: true, mode: "0999" }, "mode", 'mode must be octal digits such as 444 or "0644"'],
  [{ path: "/x", create: true, mode: 4755 }, "mode", UNSAFE_MODE],
  [{ path: "/x", create: true, mode: "0666" }, "mode", UNSAFE_MODE],
  [{ path: "/x", create: true, mode: "02644" }, "mode", UNSAFE_MODE],
  [
    { path: "/x", match: { "container-name": "(" } },
    "match.container-name",
    "container-name must be a regular expression RE2 accepts (no backreferences or lookaround)",
  ],
  [{ path: "/x", callback: "ftp://example.com" }, "callback", "callback must be an http(s) URL"],
  [
    { path: "/etc/shadow", allow: [{ exe: "sshd" }] },
    "allow[0].exe",
    'exe must be an absolute path (start with "/")',
  ],
  // The schema's pattern says it (a CEL matches() here would cost more than the server accepts).
  [{ path: "/etc/shadow", allow: [{ exe: "/usr/*/sshd" }] }, "allow[0].exe", EXE_PATTERN_MESSAGE],
  [
    { path: "/etc/shadow", allow: [{ exe: "/usr/sbin/sshd" }, { "parent-exe": "cron" }] },
    "allow[1].parent-exe",
    'parent-exe must be an absolute path (start with "/")',
  ],
  [
    { path: "/etc/shadow", allow: [{ "parent-exe": "/usr/sbin/cron*x" }] },
    "allow[0].parent-exe",
    EXE_PATTERN_MESSAGE,
  ],
  [
    { path: "/etc/shadow", allow: [{ accesses: ["read"] }] },
    "allow[0]",
    "an allow entry needs exe or parent-exe",
  ],
  [{ path: "/etc/shadow", allow: [{}] }, "allow[0]", "an allow entry needs exe or parent-exe"],
  [
    { path: "/etc/shadow", labels: { "team/a/b": "x" } },
    "labels",
    "labels keys must be label names such as team or example.com/team",
  ],
  [
    { path: "/etc/shadow", labels: { "-team": "x" } },
    "labels",
    "labels keys must be label names such as team or example.com/team",
  ],
];

describe("the HivePolicy CRD's CEL rules", () => {
  it("are found where the schema puts them, and each is shown refusing a case below", () => {
    expect(RULES.map((r) => r.at).sort()).toEqual([
      "",
      "",
      "",
      "allow[]",
      "allow[].exe",
      "allow[].parent-exe",
      "callback",
      "labels",
      "match.container-name",
      "mode",
      "mode",
      "path",
      "path",
    ]);
    for (const r of RULES)
      expect(
        REFUSED.some(([, at, message]) => at.replace(/\[\d+\]/g, "[]") === r.at && message === r.message),
        r.message,
      ).toBe(true);
  });

  it("never reject a trap the shared validation accepts", async () => {
    let valid = 0;
    await fc.assert(
      fc.asyncProperty(trapArb, async (trap) => {
        if (!validatePolicySpec({ traps: [trap] }).ok) return;
        valid += 1;
        expect(await admissionErrors(trap)).toEqual([]);
      }),
      // Most drawn traps are invalid and never sent (about 0.3 % are valid, since dryRun and
      // action joined the draw): this many runs send some 180 valid ones, so that the bound below
      // holds whatever the seed (20,000 drew 51 to 76 valid ones over five seeds).
      { numRuns: 60_000 },
    );
    // The property says something only if valid traps were drawn.
    expect(valid).toBeGreaterThan(50);
  }, 120_000);

  it.each(REFUSED)("reject %j at admission, naming spec.traps[0].%s", async (trap, at, message) => {
    const field = at === "" ? "spec.traps[0]" : `spec.traps[0].${at}`;
    const causes = await admissionCauses([trap]);
    expect(causes).toContainEqual({ field, message: expect.stringContaining(message) });
    expect(validatePolicySpec({ traps: [trap] }).ok).toBe(false);
  });

  it.each([
    [{ exe: "/usr/sbin/sshd" }],
    [{ "parent-exe": "/usr/sbin/cron" }],
    [{ exe: "/usr/lib/openssh/*", "parent-exe": "/usr/sbin/sshd*", accesses: ["read"] }],
  ])("admit the allow entry %j", async (entry) => {
    const trap = { path: "/etc/shadow", allow: [entry] };
    expect(await admissionErrors(trap)).toEqual([]);
    expect(validatePolicySpec({ traps: [trap] }).ok).toBe(true);
  });

  it("admit the trap labels Kubernetes accepts as label names", async () => {
    const trap = { path: "/x", labels: { team: "payments", "example.com/owner": "sec-ops", "a.b_c": "" } };
    expect(await admissionErrors(trap)).toEqual([]);
    expect(validatePolicySpec({ traps: [trap] }).ok).toBe(true);
  });

  it.each([644, "0644", 444, "0444", "00640", 5])("admit the mode %j", async (mode) => {
    const trap = { path: "/x", create: true, mode };
    expect(await admissionErrors(trap)).toEqual([]);
    expect(validatePolicySpec({ traps: [trap] }).ok).toBe(true);
  });

  it("refuse exactly the modes with a setuid, setgid, sticky or world-writable bit, however written", async () => {
    const modes: (number | string)[] = [];
    for (let bits = 0; bits <= 0o7777; bits++) {
      const octal = bits.toString(8);
      modes.push(Number(octal), octal, `0${octal}`);
    }
    // As many traps per policy as it may hold: the causes name each refused trap by its index.
    const per = 256;
    const refused = new Set<number>();
    for (let start = 0; start < modes.length; start += per) {
      const chunk = modes.slice(start, start + per);
      const causes = await admissionCauses(chunk.map((mode) => ({ path: "/x", create: true, mode })));
      for (const c of causes) {
        const m = /^spec\.traps\[(\d+)\]\.mode$/.exec(c.field);
        expect(m, `${c.field}: ${c.message}`).not.toBeNull();
        expect(c.message).toContain(UNSAFE_MODE);
        refused.add(start + Number(m?.[1]));
      }
    }
    for (const [i, mode] of modes.entries()) {
      const bits = Number.parseInt(String(mode), 8);
      const isRefused = refused.has(i);
      expect({ mode, refused: isRefused }).toEqual({ mode, refused: (bits & 0o7002) !== 0 });
      expect(validatePolicySpec({ traps: [{ path: "/x", create: true, mode }] }).ok).toBe(!isRefused);
    }
  }, 120_000);

  it("admit a nested quantifier, which RE2 runs in linear time", async () => {
    const trap = { path: "/x", match: { "container-name": "(a+)+" } };
    expect(await admissionErrors(trap)).toEqual([]);
    expect(validatePolicySpec({ traps: [trap] }).ok).toBe(true);
  });

  it("bound the allow list and its paths (the work one access costs the matcher)", () => {
    const allow = (trapNode.properties as Record<string, Schema>).allow as Schema;
    const entry = allow.items as Schema;
    const props = entry.properties as Record<string, Schema>;
    expect(allow.maxItems).toBe(64);
    expect(props.exe?.maxLength).toBe(4096);
    expect(props["parent-exe"]?.maxLength).toBe(4096);
    expect((props.accesses as Schema).maxItems).toBe(5);
    expect((props.accesses as Schema)["x-kubernetes-list-type"]).toBe("set");
  });

  it.each([
    // The property, its bound, and the rule over it that the unbounded estimate exceeds.
    ["path", "maxLength", 1],
    ["mode", "maxLength", 0],
    ["labels", "maxProperties", 0],
  ])(
    "bound %s (%s), without which the API server refuses the CRD: its rules' estimated cost exceeds the budget",
    (property, bound, rule) => {
      // The same CRD in a group of its own, so that the installed one is untouched; sent as JSON
      // by kubectl (a server-side dry run), exactly as written.
      const variant = (withBound: boolean) => {
        const crd = hivePolicyCrd();
        crd.spec.group = "bounds.example.com";
        crd.metadata.name = `hivepolicies.${crd.spec.group}`;
        const node = (trapNodeOf(crd).properties as Record<string, Schema>)[property] as Schema;
        expect(node[bound]).toBeDefined();
        if (!withBound) delete node[bound];
        return runKubectl(
          api.cp,
          ["create", "--dry-run=server", "-o", "name", "-f", "-"],
          JSON.stringify(crd),
        );
      };
      expect(variant(true)).toMatchObject({ code: 0, stderr: "" });
      const refused = variant(false);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain(
        `properties[traps].items.properties[${property}].x-kubernetes-validations[${rule}].rule: Forbidden: estimated rule cost exceeds budget`,
      );
    },
  );
});
