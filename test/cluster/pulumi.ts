/**
 * The real Pulumi CLI and Kubernetes provider (built by build-binaries.ts) driving a program
 * against a real control plane: each call is one operation in a child process (pulumi-run.ts).
 */
import { execFile } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { binaryDir } from "./binaries.ts";
import type { ControlPlane } from "./control-plane.ts";
import type { RunRequest, RunResult } from "./pulumi-run.ts";

const run = promisify(execFile);
const root = join(import.meta.dirname, "../..");

/** Runs `command` and returns its stdout; a failure names the command with its stderr and stdout's end. */
export async function runOrExplain(
  command: string,
  args: string[],
  options: { cwd: string; env: NodeJS.ProcessEnv },
): Promise<string> {
  try {
    return (await run(command, args, { ...options, maxBuffer: 64 << 20 })).stdout;
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(
      `${command} ${args.join(" ")} failed: ${e.stderr ?? ""}\n${(e.stdout ?? e.message).slice(-4000)}`,
    );
  }
}

/** The environment of a user's `pulumi` with a local backend and no plugin downloads. */
export function pulumiEnv(cp: ControlPlane, workDir: string): NodeJS.ProcessEnv {
  mkdirSync(workDir, { recursive: true });
  return {
    ...process.env,
    PATH: [
      binaryDir("pulumi"),
      binaryDir("pulumi-kubernetes"),
      join(root, "node_modules/.bin"),
      process.env.PATH,
    ].join(":"),
    PULUMI_HOME: join(workDir, ".pulumi-home"),
    PULUMI_CONFIG_PASSPHRASE: "hive-test-passphrase",
    PULUMI_SKIP_UPDATE_CHECK: "true",
    // A missing plugin is an error, never a download.
    PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION: "true",
    KUBECONFIG: cp.writeKubeconfig(join(workDir, "kubeconfig")),
  };
}

/** One `pulumi up` / `preview` / `destroy` of `req.program`; rejects with the CLI's output on failure. */
export async function pulumiRun(
  cp: ControlPlane,
  req: Omit<RunRequest, "backendDir"> & { backendDir?: string },
): Promise<RunResult> {
  const full: RunRequest = { backendDir: join(req.workDir, "state"), ...req };
  mkdirSync(full.backendDir, { recursive: true });
  // The program runs as Pulumi.yaml's nodeargs run it: the package resolved to this repository's sources.
  const args = ["--conditions=hive-source", join(root, "test/cluster/pulumi-run.ts"), JSON.stringify(full)];
  try {
    const { stdout } = await run(join(root, "node_modules/.bin/node"), args, {
      cwd: root,
      env: pulumiEnv(cp, req.workDir),
      maxBuffer: 64 << 20,
      // The provider waits for the DaemonSet's rollout: minutes on an emulated node.
      timeout: 1_800_000,
    });
    return JSON.parse(stdout.trim().split("\n").at(-1) ?? "{}") as RunResult;
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(
      `pulumi ${req.op} failed (${e.message.split("\n")[0]}):\n${e.stderr ?? ""}\n${(e.stdout ?? "").slice(-4000)}`,
    );
  }
}
