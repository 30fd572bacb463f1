import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { DENY_WITH_ALLOW } from "./policy.ts";
import { formatErrors, validateData, validatePolicy, validatePolicySpec } from "./validate.ts";

function policy(traps: unknown[]): unknown {
  return {
    apiVersion: "hive-operator.com/v1alpha1",
    kind: "HivePolicy",
    metadata: { name: "p", namespace: "hive" },
    spec: { traps },
  };
}

describe("policy validation", () => {
  it("accepts the reference design's sample policy, mode 444 meaning octal", () => {
    const result = validatePolicy(
      policy([
        {
          path: "/secret.txt",
          create: true,
          mode: 444,
          callback: "http://my-callback.com/alerts",
          match: {
            pod: "nginx-pod",
            namespace: "default",
            ip: "192.168.0.3",
            "container-name": ".*",
            matchLabels: { "security-level": "high" },
          },
        },
      ]),
    );
    expect(result).toEqual({ ok: true, value: expect.anything() });
  });

  it.each([644, "0644", 444, "0444", "755", 0, "0"])(
    "accepts the mode %j, which grants nothing special",
    (mode) => {
      expect(validatePolicy(policy([{ path: "/a", create: true, mode }])).ok).toBe(true);
    },
  );

  it("accepts a nested quantifier, which the agent matches in linear time", () => {
    expect(validatePolicy(policy([{ path: "/a", match: { "container-name": "(a+)+" } }])).ok).toBe(true);
  });

  it("accepts a trap with only a path", () => {
    expect(validatePolicy(policy([{ path: "/etc/shadow" }])).ok).toBe(true);
  });

  it.each([
    [
      "relative path",
      { path: "etc/shadow" },
      'spec.traps[0].path: must be an absolute path (start with "/")',
    ],
    ["'..' in path", { path: "/etc/../shadow" }, "spec.traps[0].path: must not contain '..' components"],
    ["empty path", { path: "" }, 'spec.traps[0].path: must be an absolute path (start with "/")'],
    ["missing path", { create: true }, "spec.traps[0].path: is required"],
    [
      "invalid regex",
      { path: "/a", match: { "container-name": "(" } },
      "spec.traps[0].match.container-name: must be a regular expression RE2 accepts (no backreferences or lookaround) of bounded size",
    ],
    [
      "regex with a backreference, which a linear-time engine cannot run",
      { path: "/a", match: { "container-name": "(a)\\1" } },
      "spec.traps[0].match.container-name: must be a regular expression RE2 accepts (no backreferences or lookaround) of bounded size",
    ],
    [
      "regex with a lookahead",
      { path: "/a", match: { "container-name": "(?!db)[a-z]+" } },
      "spec.traps[0].match.container-name: must be a regular expression RE2 accepts (no backreferences or lookaround) of bounded size",
    ],
    [
      "mode that is not octal digits",
      { path: "/a", create: true, mode: 999 },
      'spec.traps[0].mode: must be an octal permission mode such as 444 or "0644"',
    ],
    [
      "mode string that is not octal",
      { path: "/a", create: true, mode: "rw-r--r--" },
      'spec.traps[0].mode: must be an octal permission mode such as 444 or "0644"',
    ],
    [
      "setuid mode",
      { path: "/a", create: true, mode: 4755 },
      "spec.traps[0].mode: must not set setuid, setgid, sticky or world-writable bits; use a mode such as 0644 or 0444",
    ],
    [
      "setgid mode",
      { path: "/a", create: true, mode: "2755" },
      "spec.traps[0].mode: must not set setuid, setgid, sticky or world-writable bits; use a mode such as 0644 or 0444",
    ],
    [
      "sticky mode",
      { path: "/a", create: true, mode: "01644" },
      "spec.traps[0].mode: must not set setuid, setgid, sticky or world-writable bits; use a mode such as 0644 or 0444",
    ],
    [
      "world-writable mode",
      { path: "/a", create: true, mode: "0666" },
      "spec.traps[0].mode: must not set setuid, setgid, sticky or world-writable bits; use a mode such as 0644 or 0444",
    ],
    [
      "world-writable mode as a number",
      { path: "/a", create: true, mode: 2 },
      "spec.traps[0].mode: must not set setuid, setgid, sticky or world-writable bits; use a mode such as 0644 or 0444",
    ],
    [
      "mode without create",
      { path: "/a", mode: "0644" },
      "spec.traps[0].mode: only applies with create: true",
    ],
    [
      "dryRun without deny",
      { path: "/a", dryRun: true },
      "spec.traps[0].dryRun: only applies with action: deny",
    ],
    [
      "an unknown action",
      { path: "/a", action: "block" },
      "spec.traps[0].action: must be one of alert, deny",
    ],
    [
      "deny with an allow entry the kernel cannot decide (a pattern)",
      { path: "/a", action: "deny", allow: [{ exe: "/usr/sbin/sshd" }, { "parent-exe": "/usr/lib/*" }] },
      `spec.traps[0].allow: ${DENY_WITH_ALLOW}`,
    ],
    [
      "deny with more allow entries than the kernel decides",
      { path: "/a", action: "deny", allow: Array.from({ length: 33 }, (_, i) => ({ exe: `/bin/p${i}` })) },
      `spec.traps[0].allow: ${DENY_WITH_ALLOW}`,
    ],
    [
      "bad IP",
      { path: "/a", match: { ip: "10.0.0.256" } },
      "spec.traps[0].match.ip: must be an IPv4 address such as 10.0.0.7",
    ],
    [
      "IPv6 IP",
      { path: "/a", match: { ip: "::1" } },
      "spec.traps[0].match.ip: must be an IPv4 address such as 10.0.0.7",
    ],
    ["unknown field", { path: "/a", paht: "/b" }, "spec.traps[0].paht: is not a known field"],
    [
      "unknown match field",
      { path: "/a", match: { labels: {} } },
      "spec.traps[0].match.labels: is not a known field",
    ],
    [
      "non-http callback",
      { path: "/a", callback: "ftp://x/y" },
      "spec.traps[0].callback: must be an http:// or https:// URL",
    ],
    [
      "unknown access kind",
      { path: "/a", accesses: ["read", "delete"] },
      "spec.traps[0].accesses[1]: must be one of read, write, exec, append, open",
    ],
    [
      "relative allow exe",
      { path: "/etc/shadow", allow: [{ exe: "sshd" }] },
      'spec.traps[0].allow[0].exe: must be an absolute path (start with "/"), with "*" only as its last character',
    ],
    [
      "parent-exe (in allow) with a * before its end",
      { path: "/etc/shadow", allow: [{ exe: "/usr/sbin/sshd" }, { "parent-exe": "/usr/*/cron" }] },
      'spec.traps[0].allow[1].parent-exe: must be an absolute path (start with "/"), with "*" only as its last character',
    ],
    [
      "trap whose allow entry names no executable",
      { path: "/etc/shadow", allow: [{ accesses: ["read"] }] },
      "spec.traps[0].allow[0]: needs exe or parent-exe",
    ],
    [
      "trap with an empty allow entry",
      { path: "/etc/shadow", allow: [{ exe: "/usr/sbin/sshd" }, {}] },
      "spec.traps[0].allow[1]: needs exe or parent-exe",
    ],
    [
      "trap whose allow entry has an unknown access kind",
      { path: "/etc/shadow", allow: [{ exe: "/usr/bin/passwd", accesses: ["read", "chmod"] }] },
      "spec.traps[0].allow[0].accesses[1]: must be one of read, write, exec, append, open",
    ],
    [
      "trap whose allow entry is keyed on the process name",
      { path: "/etc/shadow", allow: [{ comm: "sshd" }] },
      "spec.traps[0].allow[0].comm: is not a known field\nspec.traps[0].allow[0]: needs exe or parent-exe",
    ],
    [
      "trap whose allow exe is longer than PATH_MAX",
      { path: "/etc/shadow", allow: [{ exe: `/${"a".repeat(4096)}` }] },
      'spec.traps[0].allow[0].exe: must be an absolute path (start with "/"), with "*" only as its last character',
    ],
  ])("rejects a %s with the field named", (_name, trap, message) => {
    const result = validatePolicy(policy([trap]));
    expect(result.ok).toBe(false);
    if (!result.ok) expect(formatErrors(result.errors)).toBe(message);
  });

  it("accepts the issue's /etc/shadow allowlist, prefixes included", () => {
    const result = validatePolicy(
      policy([
        {
          path: "/etc/shadow",
          allow: [
            { exe: "/usr/sbin/sshd" },
            { exe: "/usr/sbin/unix_chkpwd" },
            { exe: "/usr/bin/passwd", accesses: ["read", "write"] },
            { "parent-exe": "/usr/sbin/cron" },
            { exe: "/usr/lib/openssh/*", "parent-exe": "/usr/sbin/sshd" },
          ],
        },
      ]),
    );
    expect(result.ok ? "" : formatErrors(result.errors)).toBe("");
  });

  it("accepts a denying trap whose allow entries the kernel decides: exact paths, at most 32", () => {
    const allow = [
      { exe: "/usr/sbin/sshd" },
      { exe: "/usr/bin/passwd", accesses: ["read", "write"] as ["read", "write"] },
      { "parent-exe": "/usr/sbin/cron" },
      ...Array.from({ length: 29 }, (_, i) => ({ exe: `/bin/p${i}` })),
    ];
    const result = validatePolicy(policy([{ path: "/etc/shadow", action: "deny", allow }]));
    expect(result.ok ? "" : formatErrors(result.errors)).toBe("");
  });

  it("bounds the allow list", () => {
    const allow = Array.from({ length: 65 }, (_, i) => ({ exe: `/usr/bin/tool${i}` }));
    const result = validatePolicy(policy([{ path: "/etc/shadow", allow }]));
    expect(result.ok ? "" : formatErrors(result.errors)).toMatch(/^spec\.traps\[0\]\.allow: /);
    expect(validatePolicy(policy([{ path: "/etc/shadow", allow: allow.slice(0, 64) }])).ok).toBe(true);
  });

  it("rejects an empty trap list", () => {
    const result = validatePolicy(policy([]));
    expect(result.ok ? "" : formatErrors(result.errors)).toBe("spec.traps: must list at least one trap");
  });

  it("reports every problem of a policy at once", () => {
    const result = validatePolicy(policy([{ path: "x" }, { path: "/ok", match: { ip: "1.2.3" } }]));
    expect(result.ok ? [] : result.errors.map((e) => e.field)).toEqual([
      "spec.traps[0].path",
      "spec.traps[1].match.ip",
    ]);
  });

  it("names the document's own fields", () => {
    const result = validatePolicy({ kind: "HivePolicy", metadata: {}, spec: { traps: [{ path: "/a" }] } });
    expect(result.ok ? "" : formatErrors(result.errors, "policy.yaml#0")).toBe(
      "policy.yaml#0: apiVersion: is required",
    );
  });

  it("validates a bare spec with its prefix", () => {
    const result = validatePolicySpec({ traps: [{ path: "a" }] });
    expect(result.ok ? "" : result.errors[0]?.field).toBe("spec.traps[0].path");
  });

  it("never throws on arbitrary input, and always answers with named fields", () => {
    const trapish = fc.record(
      {
        path: fc.oneof(fc.string(), fc.constant("/etc/shadow"), fc.integer()),
        create: fc.oneof(fc.boolean(), fc.string()),
        mode: fc.oneof(fc.integer(), fc.string(), fc.constant("0644")),
        callback: fc.oneof(fc.webUrl(), fc.string()),
        accesses: fc.array(fc.oneof(fc.constantFrom("read", "write", "exec"), fc.string())),
        match: fc.oneof(
          fc.anything(),
          fc.record(
            {
              ip: fc.oneof(fc.ipV4(), fc.string()),
              "container-name": fc.string(),
              matchLabels: fc.anything(),
            },
            { requiredKeys: [] },
          ),
        ),
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(fc.oneof(fc.anything(), fc.array(fc.oneof(trapish, fc.anything()))), (traps) => {
        const result = validatePolicy(policy(Array.isArray(traps) ? traps : [traps]));
        if (!result.ok) {
          expect(result.errors.length).toBeGreaterThan(0);
          for (const error of result.errors) expect(error.field).toMatch(/^spec\.traps/);
        }
      }),
      { numRuns: 500 },
    );
    fc.assert(
      fc.property(fc.anything(), (value) => void validatePolicy(value)),
      { numRuns: 500 },
    );
  });
});

describe("HiveData validation", () => {
  it("requires the kernel's device beside the inode", () => {
    const result = validateData({
      apiVersion: "hive-operator.com/v1alpha1",
      kind: "HiveData",
      metadata: { name: "d" },
      spec: { "inode-no": 42, "kernel-id": "fc9a30d5-6140-4dd1-b8ef-c638f19ebd71", accesses: ["read"] },
    });
    expect(result.ok ? "" : formatErrors(result.errors)).toBe("spec.device: is required");
  });
});
