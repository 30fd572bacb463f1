/**
 * `hive version` / `hive --version`, run as a user runs them: which package, which compiled
 * kernel program (by content) and which attach modes a report or a bug is about.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ATTACH_MODES } from "../../runtime/kernel/contract.ts";
import { REPO, runHive } from "./run-hive.ts";

const manifest = JSON.parse(readFileSync(join(REPO, "package.json"), "utf8")) as { version: string };

describe("hive version", () => {
  it("prints the package's version, the program's digest, Node's version and the attach modes as JSON", async () => {
    const object = join(mkdtempSync(join(tmpdir(), "hive-version-")), "hive.bpf.o");
    writeFileSync(object, "a compiled program stands here");
    const run = await runHive(["version", "--json", "--bpf-object", object]);
    expect(run.code).toBe(0);
    const info = JSON.parse(run.stdout);
    // The digest as coreutils computes it: a user can check the object on a node the same way.
    const digest = execFileSync("sha256sum", [object], { encoding: "utf8" }).split(" ")[0] ?? "";
    expect(info).toEqual({
      version: manifest.version,
      program: `sha256:${digest.slice(0, 12)}`,
      programPath: object,
      nodeVersion: process.version,
      attachModes: [...ATTACH_MODES],
    });
  });

  it("answers --version with the same text as the version command, and says when the program is not built", async () => {
    const missing = join(mkdtempSync(join(tmpdir(), "hive-version-")), "absent.bpf.o");
    const flag = await runHive(["--version", "--bpf-object", missing]);
    const command = await runHive(["version", "--bpf-object", missing]);
    expect(flag.code).toBe(0);
    expect(flag.stdout).toBe(command.stdout);
    const lines = flag.stdout.trim().split("\n");
    expect(lines[0]).toBe(`hive ${manifest.version}`);
    expect(flag.stdout).toContain(`program   missing (${missing})`);
    expect(flag.stdout).toContain(`attach    ${ATTACH_MODES.join(", ")}`);
  });

  it("rejects an unknown option as a usage error", async () => {
    const run = await runHive(["version", "--output", "yaml"]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("hive version:");
  });
});
