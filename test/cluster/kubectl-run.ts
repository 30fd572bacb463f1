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

/**
 * kubectl and its arguments for `cp`, as the admin. Its discovery cache is the control plane's own:
 * kubectl's default (~/.kube/cache, by host and port) would serve one test the kinds of an earlier
 * control plane that had the same loopback port.
 */
export function kubectlFor(cp: ControlPlane, args: string[]): [string, string[]] {
  const kubeconfig = cp.writeKubeconfig(join(cp.dir, "admin.kubeconfig"));
  return [
    binaryPath("kubectl"),
    ["--kubeconfig", kubeconfig, "--cache-dir", join(cp.dir, "kubectl-cache"), ...args],
  ];
}

export function runKubectl(cp: ControlPlane, args: string[], input?: string): KubectlRun {
  const run = spawnSync(...kubectlFor(cp, args), {
    input,
    encoding: "utf8",
    maxBuffer: 64 << 20,
  });
  if (run.error) throw run.error;
  return { code: run.status, stdout: run.stdout, stderr: run.stderr };
}

/** What kubectl printed, one entry per line, without the empty ones. */
export const linesOf = (text: string) => text.split("\n").filter((l) => l !== "");
