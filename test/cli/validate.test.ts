import { readdir } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { runHive } from "./run-hive.ts";

const fixtures = "test/cli/fixtures";

describe("hive validate", () => {
  it("accepts a valid file and says how many policies and traps it holds", async () => {
    const run = await runHive(["validate", `${fixtures}/good.yaml`]);
    expect(run.stdout).toBe(`${fixtures}/good.yaml: ok (2 policies, 3 traps)\n`);
    expect(run.code).toBe(0);
  });

  it("prints one line per problem naming file, line, document, trap and field, and exits 1", async () => {
    const run = await runHive(["validate", `${fixtures}/bad.yaml`]);
    const doc1 = `${fixtures}/bad.yaml:%d: document 1 (HivePolicy "broken"): `;
    const at = (line: number, rest: string) => `${doc1.replace("%d", String(line))}${rest}`;
    expect(run.stdout.split("\n").filter(Boolean)).toEqual([
      at(7, 'spec.traps[0].path: must be an absolute path (start with "/")'),
      at(9, 'spec.traps[1].mode: must be an octal permission mode such as 444 or "0644"'),
      at(12, "spec.traps[1].match.ip: must be an IPv4 address such as 10.0.0.7"),
      at(
        13,
        "spec.traps[1].match.container-name: must be a regular expression RE2 accepts (no backreferences or lookaround) of bounded size",
      ),
      at(14, "spec.traps[1].match.colour: is not a known field"),
      `${fixtures}/bad.yaml:19: document 2: metadata.name: is required`,
      `${fixtures}/bad.yaml:21: document 2: spec.traps: must list at least one trap`,
    ]);
    expect(run.stderr).toBe("7 problems in 1 file\n");
    expect(run.code).toBe(1);
  });

  it("names the allow entry and field of a loose allowlist, and accepts the shipped one", async () => {
    const run = await runHive([
      "validate",
      `${fixtures}/bad-allow.yaml`,
      "examples/policies/shadow-allow.yaml",
    ]);
    const at = (line: number, rest: string) =>
      `${fixtures}/bad-allow.yaml:${line}: document 1 (HivePolicy "loose-allowlist"): spec.traps[0].${rest}`;
    const absolute = 'must be an absolute path (start with "/"), with "*" only as its last character';
    expect(run.stdout.split("\n").filter(Boolean)).toEqual([
      at(9, `allow[0].exe: ${absolute}`),
      at(10, `allow[1].parent-exe: ${absolute}`),
      at(11, "allow[2]: needs exe or parent-exe"),
      at(13, "allow[3].accesses[1]: must be one of read, write, exec, append, open"),
      at(14, "allow[4].comm: is not a known field"),
      at(14, "allow[4]: needs exe or parent-exe"),
      "examples/policies/shadow-allow.yaml: ok (1 policy, 1 trap)",
    ]);
    expect(run.stderr).toBe("6 problems in 1 file\n");
    expect(run.code).toBe(1);
  });

  it("reports YAML syntax errors with their line", async () => {
    // .txt: the repository's linter parses *.yaml files, and this one is broken on purpose.
    const run = await runHive(["validate", `${fixtures}/syntax-error.txt`]);
    expect(run.stdout).toBe(
      `${fixtures}/syntax-error.txt:8: document 1: YAML syntax error: All mapping items must start at the same column\n`,
    );
    expect(run.code).toBe(1);
  });

  it("reports an unreadable file, still checks the others, and exits 5", async () => {
    const run = await runHive(["validate", `${fixtures}/missing.yaml`, `${fixtures}/good.yaml`]);
    expect(run.stdout).toBe(
      `${fixtures}/missing.yaml: cannot read policy file (ENOENT); check the path\n` +
        `${fixtures}/good.yaml: ok (2 policies, 3 traps)\n`,
    );
    expect(run.code).toBe(5);
  });

  it("accepts every example policy shipped in examples/policies", async () => {
    const files = (await readdir("examples/policies")).filter((f) => f.endsWith(".yaml")).sort();
    expect(files.length).toBeGreaterThan(0);
    const run = await runHive(["validate", ...files.map((f) => `examples/policies/${f}`)]);
    expect(
      run.stdout
        .split("\n")
        .filter(Boolean)
        .every((line) => / ok \(/.test(line)),
    ).toBe(true);
    expect(run.code).toBe(0);
  });

  it("refuses a command line without files with a usage error (exit 2)", async () => {
    const run = await runHive(["validate"]);
    expect(run.stderr).toBe(
      "hive validate: validate needs at least one FILE\nRun `hive validate --help` for usage.\n",
    );
    expect(run.code).toBe(2);
  });
});

describe("hive", () => {
  it("prints help for every command and exits 0", async () => {
    for (const command of ["agent", "watch", "render", "validate", "status"]) {
      const run = await runHive([command, "--help"]);
      expect(run.stdout).toMatch(new RegExp(`^Usage: hive ${command}`));
      expect(run.code).toBe(0);
    }
    const top = await runHive(["--help"]);
    expect(top.stdout).toMatch(/^Usage: hive COMMAND/);
    expect(top.code).toBe(0);
  });

  it("rejects an unknown command and an unknown option with exit 2", async () => {
    const command = await runHive(["frobnicate"]);
    expect(command.stderr).toBe('hive: unknown command "frobnicate"; run `hive --help` for the list\n');
    expect(command.code).toBe(2);
    const option = await runHive(["validate", "--colour", "x.yaml"]);
    expect(option.stderr).toMatch(/^hive validate: Unknown option '--colour'/);
    expect(option.code).toBe(2);
  });
});
