/**
 * `npm run demo` exactly as the README tells a user to run it (through scripts/bootstrap.sh),
 * with its output checked: the alert the callback receiver got, for the demo's trap, from
 * the process that read the file. Boots a VM here (this kernel has no kprobes).
 */
import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import { validateAlert } from "../../api/index.ts";
import { REPO } from "./run-hive.ts";
import { cliVmKernel } from "./vm-gate.ts";

const kernel = cliVmKernel();

function npmRunDemo(): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn("npm", ["run", "--silent", "demo"], { cwd: REPO, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (c: string) => {
      stdout += c;
    });
    child.stderr.setEncoding("utf8").on("data", (c: string) => {
      stderr += c;
    });
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

describe.runIf(kernel !== undefined)("npm run demo", () => {
  it("shows the alert the callback receiver got for the read of the trapped file, and exits 0", {
    timeout: 300_000,
  }, async () => {
    const run = await npmRunDemo();
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    expect(run.stdout).toMatch(/\[demo\] trap armed on \/run\/hive-demo-secret/);
    const reader = /\[demo\] process (\d+) ran: cat \/run\/hive-demo-secret/.exec(run.stdout);
    expect(reader).not.toBeNull();
    expect(run.stdout).toMatch(
      /\[demo\] the receiver got POST \/hive-alerts\n {2}content-type: application\/json\n {2}hive-alert-id: [0-9a-f-]{36}\n/,
    );
    // The pretty-printed alert runs from the line "{" to the line "}".
    const body = /\n(\{\n[\s\S]*?\n\})\n/.exec(run.stdout)?.[1];
    expect(body).toBeDefined();
    const alert = JSON.parse(body ?? "{}") as {
      hive_policy_name: string;
      metadata: { path: string; accesses: string[] };
      process: { tgid: number; comm: string };
    };
    expect(validateAlert(alert).ok).toBe(true);
    expect(alert.hive_policy_name).toBe("demo-secret");
    expect(alert.metadata.path).toBe("/run/hive-demo-secret");
    expect(alert.metadata.accesses).toContain("read");
    expect(alert.process).toMatchObject({ tgid: Number(reader?.[1]), comm: "cat" });
    expect(run.stdout).toMatch(/\[demo\] Ctrl-C: hive watch detached and exited 0/);
  });
});
