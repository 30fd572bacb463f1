/**
 * Runs the `hive` command the way a user does: a separate Node 24 process on
 * runtime/cli/main.ts, with its real stdout, stderr and exit code.
 */
import { spawn } from "node:child_process";

export const REPO = new URL("../../", import.meta.url).pathname;
export const HIVE_MAIN = new URL("../../runtime/cli/main.ts", import.meta.url).pathname;

export interface HiveRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function runHive(
  args: string[],
  options: { input?: string; timeoutMs?: number } = {},
): Promise<HiveRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [HIVE_MAIN, ...args], {
      cwd: REPO,
      env: { ...process.env, HIVE_LOG_LEVEL: "warn" },
      stdio: ["pipe", "pipe", "pipe"],
      timeout: options.timeoutMs ?? 60_000,
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      stdout += chunk;
    });
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
      stderr += chunk;
    });
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(options.input ?? "");
  });
}
