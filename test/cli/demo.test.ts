/**
 * `npm run demo` exactly as docs/development.md tells a user to run it (through scripts/bootstrap.sh),
 * with its output checked: the alerts the callback receiver got, for the demo's traps, from
 * the processes that read the files (on the host, and inside a real container). Boots a VM here (this kernel has no kprobes).
 */
import { execFileSync, spawn } from "node:child_process";
import { realpathSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { validateAlert } from "../../api/index.ts";
import { containersAvailable } from "../containers/containerd-harness.ts";
import { collectOutput, type HiveRun, REPO } from "./run-hive.ts";
import { cliVmKernel } from "./vm-gate.ts";

const kernel = cliVmKernel();

function npmRunDemo(): Promise<HiveRun> {
  return collectOutput(
    spawn("npm", ["run", "--silent", "demo"], { cwd: REPO, stdio: ["ignore", "pipe", "pipe"] }),
  );
}

describe.runIf(kernel !== undefined)("npm run demo", () => {
  it("shows the alerts the callback receiver got for reads of the trapped files, and exits 0", {
    timeout: 900_000,
  }, async () => {
    const run = await npmRunDemo();
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    expect(run.stdout).toMatch(/\[demo\] trap armed on \/run\/hive-demo-secret/);
    const reader = /\[demo\] process (\d+) ran: cat \/run\/hive-demo-secret/.exec(run.stdout);
    expect(reader).not.toBeNull();
    expect(run.stdout).toMatch(
      /\[demo\] alert 1: the receiver got POST \/hive-alerts\n {2}content-type: application\/json\n {2}hive-alert-id: [0-9a-f-]{36}\n/,
    );
    // Each pretty-printed alert runs from a line "{" to a line "}".
    const alerts = [...run.stdout.matchAll(/\n(\{\n[\s\S]*?\n\})\n/g)].map(
      (m) =>
        JSON.parse(m[1] ?? "{}") as {
          hive_policy_name: string;
          metadata: { path: string; accesses: string[] };
          process: {
            tgid: number;
            comm: string;
            exe?: string;
            exe_source: string;
            parent?: { exe?: string };
          };
          pod?: unknown;
        },
    );
    for (const alert of alerts) expect(validateAlert(alert).ok).toBe(true);
    const [host, container] = alerts;
    expect(host?.hive_policy_name).toBe("demo-secret");
    expect(host?.metadata.path).toBe("/run/hive-demo-secret");
    expect(host?.metadata.accesses).toContain("read");
    // The executable and the parent as the kernel recorded them: cat is gone before the alert is built.
    expect(host?.process).toMatchObject({
      tgid: Number(reader?.[1]),
      comm: "cat",
      exe: realpathSync(execFileSync("sh", ["-c", "command -v cat"], { encoding: "utf8" }).trim()),
      exe_source: "exec",
      parent: { exe: expect.stringMatching(/^\//) },
    });
    expect(host?.pod).toBeUndefined();
    // The guest runs this machine's binaries: a container part exactly when containerd and runc are here.
    if (containersAvailable().ok) {
      expect(alerts).toHaveLength(2);
      expect(container?.metadata.path).toBe("/etc/hive-demo-secret");
      expect(container?.process).toMatchObject({
        exe: expect.stringMatching(/^\/bin\//),
        exe_source: "exec",
      });
      expect(container?.pod).toEqual({
        name: "hive-demo-web",
        namespace: "default",
        container: { id: "hive-demo-web", name: "hive-demo-web" },
      });
    } else {
      expect(run.stdout).toContain("[demo] no container part:");
      expect(alerts).toHaveLength(1);
    }
    expect(run.stdout).toMatch(/\[demo\] Ctrl-C: hive watch detached and exited 0/);
  });
});
