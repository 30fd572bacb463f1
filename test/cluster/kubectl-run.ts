/**
 * The real kubectl as a user runs it against a test control plane, as the admin: its exit code,
 * stdout and stderr, for tests that look at what kubectl prints (and at its failures).
 * install.ts's `kubectl` throws on a failure instead.
 */
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { binaryPath } from "./binaries.ts";
import type { ControlPlane } from "./control-plane.ts";

export interface KubectlRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function runKubectl(cp: ControlPlane, args: string[], input?: string): KubectlRun {
  const kubeconfig = cp.writeKubeconfig(join(cp.dir, "admin.kubeconfig"));
  const run = spawnSync(binaryPath("kubectl"), ["--kubeconfig", kubeconfig, ...args], {
    input,
    encoding: "utf8",
    maxBuffer: 64 << 20,
  });
  if (run.error) throw run.error;
  return { code: run.status, stdout: run.stdout, stderr: run.stderr };
}

/** What kubectl printed, one entry per line, without the empty ones. */
export const linesOf = (text: string) => text.split("\n").filter((l) => l !== "");
