/**
 * Running the build: named steps that print their time, commands whose output goes to the
 * build log, and buildah on the build's own storage.
 */
import { type SpawnOptions, spawn } from "node:child_process";
import { createWriteStream, type WriteStream } from "node:fs";
import { relative } from "node:path";
import { buildahStorageFlags } from "../buildah-storage.ts";
import { logPath, root, storage, verbose } from "./settings.ts";

let log: WriteStream | undefined;

/** Starts the build log (the caller holds the build lock: one writer). */
export function openLog(): void {
  log = createWriteStream(logPath);
}

export function closeLog(): void {
  log?.end();
  log = undefined;
}

export function say(message: string): void {
  process.stderr.write(`hive-image: ${message}\n`);
  log?.write(`hive-image: ${message}\n`);
}

export class StepError extends Error {}

/** Runs one named step, printing its time unless `quiet`; a failure names the step. */
export async function step<T>(name: string, body: () => Promise<T>, quiet = false): Promise<T> {
  const started = performance.now();
  try {
    const result = await body();
    if (!quiet) say(`${name}: ${seconds(started)} s`);
    return result;
  } catch (error) {
    if (error instanceof StepError) throw error;
    throw new StepError(`step "${name}" failed: ${(error as Error).message}`);
  }
}

export function seconds(since: number): number {
  return Math.round((performance.now() - since) / 100) / 10;
}

/** Runs a command; its output goes to the build log (and the terminal with --verbose). */
export function run(cmd: string, args: string[], options: SpawnOptions = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    log?.write(`$ ${cmd} ${args.join(" ")}\n`);
    const child = spawn(cmd, args, { ...options, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let tail = "";
    const keep = (b: Buffer) => {
      log?.write(b);
      if (verbose) process.stderr.write(b);
      tail = (tail + b.toString()).slice(-3000);
    };
    child.stdout?.on("data", (b: Buffer) => {
      stdout += b.toString();
      keep(b);
    });
    child.stderr?.on("data", keep);
    child.on("error", (e) => reject(new Error(`${cmd}: ${e.message}`)));
    child.on("close", (code) => {
      if (code === 0) resolve(stdout);
      else
        reject(
          new Error(
            `${[cmd, ...args.filter((a) => !storageFlags.includes(a)).slice(0, 3)].join(" ")}… exited with ${code}; last output:\n${tail}\n(full log: ${relative(root, logPath)})`,
          ),
        );
    });
  });
}

export const storageFlags = buildahStorageFlags(storage);
export const buildah = (args: string[]) => run("buildah", [...storageFlags, ...args]);

export async function imageId(name: string): Promise<string | undefined> {
  const out = await buildah(["images", "--noheading", "--no-trunc", "--format", "{{.ID}}", name]).catch(
    () => "",
  );
  return (
    out
      .trim()
      .split("\n")[0]
      ?.replace(/^sha256:/, "") || undefined
  );
}

export async function workingContainers(): Promise<Set<string>> {
  const out = await buildah(["containers", "--all", "--noheading", "--format", "{{.ContainerID}}"]);
  return new Set(out.split("\n").filter((l) => l !== ""));
}
