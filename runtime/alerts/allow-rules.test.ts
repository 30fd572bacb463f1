import { describe, expect, it } from "vitest";
import type { AllowEntry } from "../../api/policy.ts";
import { MAY } from "../kernel/access-bits.ts";
import type { FileKey } from "../kernel/contract.ts";
import { ALLOW_ANY, ALLOW_ENTRIES } from "../kernel/layout.ts";
import { allowFlagOf, allowRulesFor } from "./allow-rules.ts";

const file = (ino: number): FileKey => ({ major: 0, minor: 52, ino: BigInt(ino) });
const word = (bits: number[]) => bits.reduce((w, b) => (w | (1 << b)) >>> 0, 0);

/** The issue's /etc/shadow list: four exact entries, then one the kernel cannot decide (a pattern). */
const SHADOW: AllowEntry[] = [
  { exe: "/usr/sbin/sshd" },
  { exe: "/usr/sbin/unix_chkpwd" },
  { exe: "/usr/bin/passwd", accesses: ["read", "write"] },
  { "parent-exe": "/usr/sbin/cron" },
  { exe: "/usr/lib/openssh/*", "parent-exe": "/usr/sbin/sshd" },
];
const FILES = new Map([
  ["/usr/sbin/sshd", [file(1)]],
  ["/usr/sbin/unix_chkpwd", [file(2)]],
  ["/usr/bin/passwd", [file(3)]],
  ["/usr/sbin/cron", [file(4)]],
]);

describe("a trap's allow list as the kernel decides it", () => {
  it("names each file by the entries that name it, and decides only exact entries", () => {
    const rules = allowRulesFor(7, SHADOW, { files: FILES });
    expect(rules.map((r) => [r.file.ino, r.exe, r.parent])).toEqual([
      // sshd is also entry 4's parent, but entry 4 has a pattern: user space decides it.
      [1n, word([0]), 0],
      [2n, word([1]), 0],
      [3n, word([2]), 0],
      [4n, 0, word([3])],
    ]);
    for (const r of rules) {
      expect(r.slot).toBe(7);
      expect(r.host).toBe(false);
      expect(r.decided).toBe(word([0, 1, 2, 3]));
      expect(r.needsExe).toBe(word([0, 1, 2]));
      expect(r.needsParent).toBe(word([3]));
      expect(r.kinds.slice(0, 5)).toEqual([ALLOW_ANY, ALLOW_ANY, MAY.read | MAY.write, ALLOW_ANY, 0]);
      expect(r.kinds).toHaveLength(ALLOW_ENTRIES);
    }
    expect(allowFlagOf(rules)).toEqual({ parent: true });
  });

  it("writes nothing the kernel could allow by: no file found, only patterns, an empty list", () => {
    expect(allowRulesFor(7, SHADOW, { files: new Map() })).toEqual([]);
    expect(allowRulesFor(7, [{ exe: "/usr/*" }], { files: FILES })).toEqual([]);
    expect(allowRulesFor(7, [], { files: FILES })).toEqual([]);
    expect(allowRulesFor(7, undefined, { files: FILES })).toEqual([]);
    expect(allowFlagOf([])).toBeUndefined();
  });

  it("leaves entries past the kernel's ALLOW_ENTRIES to user space", () => {
    const allow: AllowEntry[] = Array.from({ length: ALLOW_ENTRIES + 2 }, (_, i) => ({ exe: `/bin/p${i}` }));
    const files = new Map(allow.map((e, i) => [e.exe ?? "", [file(100 + i)]]));
    const rules = allowRulesFor(1, allow, { files });
    expect(rules).toHaveLength(ALLOW_ENTRIES);
    expect(rules[ALLOW_ENTRIES - 1]?.exe).toBe(word([ALLOW_ENTRIES - 1]));
    expect(rules[0]?.decided).toBe(0xffffffff);
  });

  it("needs both files of an entry naming an exe and its parent, and says when the parent is looked up", () => {
    const rules = allowRulesFor(3, [{ exe: "/usr/sbin/unix_chkpwd", "parent-exe": "/usr/sbin/sshd" }], {
      files: FILES,
      host: true,
    });
    expect(rules.map((r) => [r.file.ino, r.exe, r.parent, r.needsExe, r.needsParent, r.host])).toEqual([
      [2n, 1, 0, 1, 1, true],
      [1n, 0, 1, 1, 1, true],
    ]);
    expect(allowFlagOf(allowRulesFor(3, [{ exe: "/usr/sbin/sshd" }], { files: FILES }))).toEqual({
      parent: false,
    });
  });
});
