import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ACCESS_KINDS, type AccessKind } from "../../api/meta.ts";
import type { AllowEntry } from "../../api/policy.ts";
import type { ExecIdentity, ProcessIdentity } from "../kernel/contract.ts";
import { type AllowSubject, allowingEntry, describeEntry, entryMatches, exeMatches } from "./allowlist.ts";

const exec = (exe: string): ExecIdentity => ({ exe, source: "exec" });

function subject(
  exe: ExecIdentity,
  parent: ExecIdentity | undefined = exec("/bin/sh"),
  accesses: AccessKind[] = ["read"],
): AllowSubject {
  const process: ProcessIdentity = { exe, execNs: 0n, ppid: 1 };
  if (parent) process.parent = { pid: 1, exe: parent };
  return { accesses, process };
}

const SHADOW: AllowEntry[] = [
  { exe: "/usr/sbin/sshd" },
  { exe: "/usr/sbin/unix_chkpwd" },
  { exe: "/usr/bin/passwd", accesses: ["read", "write"] },
  { "parent-exe": "/usr/sbin/cron" },
];

describe("exe patterns", () => {
  it("match the exact kernel-resolved path, and not a copy of the binary elsewhere", () => {
    expect(exeMatches("/usr/sbin/sshd", exec("/usr/sbin/sshd"))).toBe(true);
    expect(exeMatches("/usr/sbin/sshd", exec("/tmp/sshd"))).toBe(false);
    expect(exeMatches("/usr/sbin/sshd", exec("/usr/sbin/sshd2"))).toBe(false);
    expect(exeMatches("/usr/sbin/sshd", exec("/usr/sbin/ssh"))).toBe(false);
    expect(exeMatches("/usr/sbin/sshd", exec("/var/lib/x/usr/sbin/sshd"))).toBe(false);
  });

  it("match a prefix only with a trailing *", () => {
    expect(exeMatches("/usr/lib/openssh/*", exec("/usr/lib/openssh/sftp-server"))).toBe(true);
    expect(exeMatches("/usr/lib/openssh/*", exec("/usr/lib/openssh/deeper/helper"))).toBe(true);
    expect(exeMatches("/usr/lib/openssh/*", exec("/usr/lib/openssh-evil/x"))).toBe(false);
    expect(exeMatches("/usr/bin/python3*", exec("/usr/bin/python3.11"))).toBe(true);
    expect(exeMatches("/usr/bin/python3*", exec("/usr/bin/python"))).toBe(false);
  });

  it("never match an executable the kernel did not know, or only knew in part", () => {
    expect(exeMatches("/usr/sbin/sshd", { source: "unknown" })).toBe(false);
    expect(exeMatches("/usr/sbin/sshd", { exe: "/usr/sbin/sshd", source: "unknown" })).toBe(false);
    expect(exeMatches("/*", { source: "exec" })).toBe(false);
    expect(exeMatches("/usr/sbin/sshd", { exe: "/usr/sbin/sshd", source: "exec", truncated: true })).toBe(
      false,
    );
    expect(exeMatches("/*", { exe: "/usr/sbin/sshd", source: "seed", truncated: true })).toBe(false);
    expect(exeMatches("/usr/sbin/sshd", undefined)).toBe(false);
    expect(exeMatches("/*", exec("sshd"))).toBe(false);
    expect(exeMatches("/*", exec(""))).toBe(false);
  });

  it("match a process seeded when the program loaded (its exe came from the kernel then)", () => {
    expect(exeMatches("/usr/sbin/sshd", { exe: "/usr/sbin/sshd", source: "seed" })).toBe(true);
  });

  it("match nothing when the pattern is one validation refuses", () => {
    expect(exeMatches("sshd", exec("sshd"))).toBe(false);
    expect(exeMatches("/usr/*/sshd", exec("/usr/*/sshd"))).toBe(false);
    expect(exeMatches("/usr/*/sshd", exec("/usr/sbin/sshd"))).toBe(false);
    expect(exeMatches("*", exec("/usr/sbin/sshd"))).toBe(false);
  });

  it("agree with the schema's pattern: a valid pattern without * matches only itself", () => {
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom("usr", "sbin", "sshd", "a", "*", ".", ".."), { minLength: 1, maxLength: 4 }),
        fc.array(fc.constantFrom("usr", "sbin", "sshd", "a", "*"), { minLength: 1, maxLength: 4 }),
        (p, e) => {
          const pattern = `/${p.join("/")}`;
          const exe = `/${e.join("/")}`;
          const valid = /^\/[^*]*[*]?$/.test(pattern);
          const expected = !valid
            ? false
            : pattern.endsWith("*")
              ? exe.startsWith(pattern.slice(0, -1))
              : exe === pattern;
          expect(exeMatches(pattern, exec(exe))).toBe(expected);
        },
      ),
    );
  });
});

describe("allow entries", () => {
  it("allow the issue's /etc/shadow readers and nobody else", () => {
    expect(allowingEntry(SHADOW, subject(exec("/usr/sbin/sshd")))).toBe(0);
    expect(allowingEntry(SHADOW, subject(exec("/usr/sbin/unix_chkpwd")))).toBe(1);
    expect(allowingEntry(SHADOW, subject(exec("/usr/bin/passwd"), undefined, ["read", "write"]))).toBe(2);
    expect(allowingEntry(SHADOW, subject(exec("/usr/bin/anything"), exec("/usr/sbin/cron")))).toBe(3);
    expect(allowingEntry(SHADOW, subject(exec("/usr/bin/cat")))).toBeUndefined();
    expect(allowingEntry(SHADOW, subject(exec("/tmp/sshd")))).toBeUndefined();
    expect(allowingEntry(SHADOW, subject(exec("/usr/bin/cat"), exec("/tmp/cron")))).toBeUndefined();
    expect(allowingEntry(undefined, subject(exec("/usr/sbin/sshd")))).toBeUndefined();
    expect(allowingEntry([], subject(exec("/usr/sbin/sshd")))).toBeUndefined();
  });

  it("need every field they have to match", () => {
    const entry: AllowEntry = {
      exe: "/usr/lib/openssh/*",
      "parent-exe": "/usr/sbin/sshd",
      accesses: ["read"],
    };
    expect(entryMatches(entry, subject(exec("/usr/lib/openssh/sftp-server"), exec("/usr/sbin/sshd")))).toBe(
      true,
    );
    expect(entryMatches(entry, subject(exec("/usr/lib/openssh/sftp-server"), exec("/bin/bash")))).toBe(false);
    expect(entryMatches(entry, subject(exec("/usr/bin/cat"), exec("/usr/sbin/sshd")))).toBe(false);
    expect(
      entryMatches(entry, subject(exec("/usr/lib/openssh/sftp-server"), exec("/usr/sbin/sshd"), ["write"])),
    ).toBe(false);
  });

  it("allow an access only when all its kinds are among the entry's accesses", () => {
    const passwd = SHADOW[2] as AllowEntry;
    const at = (accesses: AccessKind[]) =>
      entryMatches(passwd, subject(exec("/usr/bin/passwd"), undefined, accesses));
    expect(at(["read"])).toBe(true);
    expect(at(["write"])).toBe(true);
    expect(at(["read", "write"])).toBe(true);
    expect(at(["read", "open"])).toBe(false);
    expect(at(["exec"])).toBe(false);
    // No decoded kind is within no list: only an entry without `accesses` allows it.
    expect(at([])).toBe(false);
    expect(entryMatches({ exe: "/usr/bin/passwd" }, subject(exec("/usr/bin/passwd"), undefined, []))).toBe(
      true,
    );
    for (const kind of ACCESS_KINDS) {
      expect(
        entryMatches({ exe: "/usr/bin/passwd" }, subject(exec("/usr/bin/passwd"), undefined, [kind])),
      ).toBe(true);
    }
  });

  it("fail closed on what the kernel did not record: unknown executable, no parent, no process", () => {
    expect(allowingEntry(SHADOW, subject({ source: "unknown" }))).toBeUndefined();
    expect(allowingEntry(SHADOW, subject(exec("/usr/bin/vi"), { source: "unknown" }))).toBeUndefined();
    expect(allowingEntry(SHADOW, subject(exec("/usr/bin/vi"), undefined))).toBeUndefined();
    expect(allowingEntry(SHADOW, { accesses: ["read"] })).toBeUndefined();
    expect(
      allowingEntry(
        SHADOW,
        subject(exec("/usr/bin/vi"), { exe: "/usr/sbin/cron", source: "exec", truncated: true }),
      ),
    ).toBeUndefined();
  });

  it("never allow through an entry that names no executable", () => {
    expect(entryMatches({}, subject(exec("/usr/sbin/sshd")))).toBe(false);
    expect(entryMatches({ accesses: ["read"] }, subject(exec("/usr/sbin/sshd")))).toBe(false);
  });

  it("are described for logs and status", () => {
    expect(describeEntry({ exe: "/usr/bin/passwd", accesses: ["read", "write"] })).toBe(
      "exe=/usr/bin/passwd accesses=read,write",
    );
    expect(describeEntry({ "parent-exe": "/usr/sbin/cron" })).toBe("parent-exe=/usr/sbin/cron");
  });
});
