/**
 * `hive watch` refuses what it can refuse before touching the kernel, with the documented
 * exit codes (the kernel path itself is tested under QEMU in watch.test.ts).
 */
import { describe, expect, it } from "vitest";
import { runHive } from "./run-hive.ts";

describe("hive watch, before the kernel", () => {
  it("needs at least one --policy", async () => {
    const run = await runHive(["watch"]);
    expect(run.stderr).toBe(
      "hive watch: watch needs at least one --policy FILE\nRun `hive watch --help` for usage.\n",
    );
    expect(run.code).toBe(2);
  });

  it("accepts only auto, kprobe.multi, fentry or kprobe as attach mode, and only http(s) callbacks", async () => {
    const attach = await runHive([
      "watch",
      "--policy",
      "examples/policies/demo-secret.yaml",
      "--attach",
      "uprobe",
    ]);
    expect(attach.stderr).toMatch(
      /^hive watch: --attach must be one of auto, kprobe\.multi, fentry, kprobe, not "uprobe"\n/,
    );
    expect(attach.code).toBe(2);
    const callback = await runHive([
      "watch",
      "--policy",
      "examples/policies/demo-secret.yaml",
      "--callback",
      "ftp://x",
    ]);
    expect(callback.stderr).toMatch(/^hive watch: --callback must be an http\(s\) URL, not "ftp:\/\/x"\n/);
    expect(callback.code).toBe(2);
  });

  it("refuses an invalid policy file with every problem, and exit 1", async () => {
    const run = await runHive(["watch", "--policy", "test/cli/fixtures/bad.yaml"]);
    expect(run.stderr.split("\n").slice(0, 2)).toEqual([
      "hive watch: PolicyInvalid: 7 problems in the policy files (test/cli/fixtures/bad.yaml):",
      '  test/cli/fixtures/bad.yaml:7: document 1 (HivePolicy "broken"): spec.traps[0].path: must be an absolute path (start with "/")',
    ]);
    expect(run.stderr).toContain(
      "\n  test/cli/fixtures/bad.yaml:21: document 2: spec.traps: must list at least one trap\n",
    );
    expect(run.stderr).toContain(
      "\n  hint: fix the fields named above (`hive validate FILE…` checks them without running anything)",
    );
    expect(run.code).toBe(1);
  });

  it("says which policy file it cannot read, with exit 5", async () => {
    const run = await runHive(["watch", "--policy", "no-such-policy.yaml"]);
    expect(run.stderr).toBe(
      "hive watch: InputUnreadable: cannot read policy file (ENOENT) (no-such-policy.yaml); check the path\n",
    );
    expect(run.code).toBe(5);
  });
});
