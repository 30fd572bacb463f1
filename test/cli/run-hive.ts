/**
 * Runs the `hive` command the way a user does: a separate Node 24 process on
 * runtime/cli/main.ts, with its real stdout, stderr and exit code.
 */
import { type ChildProcessByStdio, spawn } from "node:child_process";
import type { Readable, Writable } from "node:stream";

export const REPO = new URL("../../", import.meta.url).pathname;
export const HIVE_MAIN = new URL("../../runtime/cli/main.ts", import.meta.url).pathname;

export interface HiveRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Waits for a spawned process to end, with everything it wrote on stdout and stderr. */
export function collectOutput(
  child: ChildProcessByStdio<Writable | null, Readable, Readable>,
): Promise<HiveRun> {
  return new Promise((resolve, reject) => {
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
  });
}

export function runHive(
  args: string[],
  options: { input?: string; timeoutMs?: number } = {},
): Promise<HiveRun> {
  const child = spawn(process.execPath, [HIVE_MAIN, ...args], {
    cwd: REPO,
    env: { ...process.env, HIVE_LOG_LEVEL: "warn" },
    stdio: ["pipe", "pipe", "pipe"],
    timeout: options.timeoutMs ?? 60_000,
  });
  const run = collectOutput(child);
  child.stdin.end(options.input ?? "");
  return run;
}
