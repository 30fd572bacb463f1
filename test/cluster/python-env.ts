/**
 * The Python environment of the README's Python program: a virtual environment with the pinned
 * Pulumi SDK (python/requirements.txt), made once per machine in a cache outside the repository
 * (`$HIVE_PY_CACHE`, default ~/.cache/hive/python/<hash of the requirements>), from PyPI by pip.
 *
 *   node test/cluster/python-env.ts      makes it if missing (scripts/bootstrap.sh test)
 */
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

const REQUIREMENTS = join(import.meta.dirname, "python/requirements.txt");

/** The virtual environment's directory (made or not). */
export function pythonEnvDir(): string {
  const hash = createHash("sha256").update(readFileSync(REQUIREMENTS)).digest("hex").slice(0, 12);
  const root = process.env.HIVE_PY_CACHE ?? join(homedir(), ".cache/hive/python");
  return join(root, `pulumi-${hash}`);
}

export function pythonBinary(): string {
  return join(pythonEnvDir(), "bin/python");
}

function sh(command: string, args: string[]): void {
  const r = spawnSync(command, args, { encoding: "utf8", stdio: ["ignore", "inherit", "pipe"] });
  if (r.status !== 0) throw new Error(`${command} ${args.join(" ")} failed:\n${r.stderr}`);
}

/**
 * Makes the environment when it is missing. A venv names its own path in its scripts, so it is made
 * where it stays; a marker written last tells a complete one from an interrupted one (made again).
 */
export function ensurePythonEnv(log: (m: string) => void = () => {}): string {
  const dir = pythonEnvDir();
  const done = join(dir, ".hive-complete");
  if (existsSync(done)) return dir;
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(join(dir, ".."), { recursive: true });
  log(`making the Python environment of the Pulumi SDK (${REQUIREMENTS}) in ${dir}`);
  sh("python3", ["-m", "venv", dir]);
  sh(join(dir, "bin/pip"), ["install", "--quiet", "--disable-pip-version-check", "-r", REQUIREMENTS]);
  writeFileSync(done, "");
  log("Python environment ready");
  return dir;
}

if (process.argv[1] === import.meta.filename)
  ensurePythonEnv((m) => process.stderr.write(`hive-python: ${m}\n`));
