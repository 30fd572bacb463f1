/**
 * Builds the real control plane, node and Pulumi programs the tests run (binaries.ts names them)
 * into the cache, once per pinned version, showing progress as packages compile.
 *
 *   node test/cluster/build-binaries.ts            every set not built yet
 *   node test/cluster/build-binaries.ts etcd kubernetes
 *
 * Go comes from PATH (or /usr/local/go/bin); modules from the Go module proxy through the `go`
 * client. Builds are static (CGO_ENABLED=0), trimmed, and go to a temporary directory renamed
 * into place only when every program of the set is there.
 */
import { spawn, spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import {
  BINARY_SETS,
  type BinarySet,
  cacheRoot,
  GO_MODULES_DIR,
  isBuilt,
  pinnedVersion,
  RENAMES,
  setDir,
} from "./binaries.ts";
import { goBinary } from "./go-toolchain.ts";

const log = (msg: string) => process.stderr.write(`hive-build: ${msg}\n`);

function goEnv(): NodeJS.ProcessEnv {
  return { ...process.env, CGO_ENABLED: "0", GOFLAGS: "-mod=readonly -buildvcs=false", GOTOOLCHAIN: "local" };
}

function go(args: string[], cwd: string): string {
  const r = spawnSync(goBinary(), args, { cwd, env: goEnv(), encoding: "utf8", maxBuffer: 256 << 20 });
  if (r.status !== 0) throw new Error(`go ${args.join(" ")} failed in ${cwd}:\n${r.stderr}`);
  return r.stdout;
}

function ldflags(set: BinarySet, version: string): string {
  const minor = version.split(".")[1] ?? "";
  const vars = Object.entries(set.versionVars ?? {}).map(
    ([k, v]) => `-X ${k}=${v.replace("$VERSION", version).replace("$MINOR", minor)}`,
  );
  return ["-s", "-w", ...vars].join(" ");
}

/**
 * Where to build: the set's module directory, or — when a main package embeds files the module zip
 * lacks — a copy of it whose upstream module is replaced by a writable copy with those files added.
 * (`go build -overlay` may not replace files in the module cache.)
 */
function buildDirFor(set: BinarySet, version: string, work: string): string {
  const dir = join(GO_MODULES_DIR, set.name);
  if (!set.generated) return dir;
  const moduleDir = go(["list", "-m", "-f", "{{.Dir}}", set.module], dir).trim();
  const src = join(work, "src");
  cpSync(moduleDir, src, { recursive: true });
  spawnSync("chmod", ["-R", "u+w", src]);
  for (const [rel, content] of Object.entries(set.generated(src, version)))
    writeFileSync(join(src, rel), content);
  const mod = join(work, "mod");
  mkdirSync(mod);
  for (const f of ["go.mod", "go.sum", "tools.go"]) cpSync(join(dir, f), join(mod, f));
  go(["mod", "edit", `-replace=${set.module}=${src}`], mod);
  return mod;
}

/** Runs `go build -v` and reports how many of the set's packages have compiled, every 20 s. */
async function buildSet(set: BinarySet): Promise<void> {
  const dir = join(GO_MODULES_DIR, set.name);
  const version = pinnedVersion(set);
  const started = Date.now();
  log(`${set.name} ${version}: downloading modules`);
  go(["mod", "download"], dir);
  mkdirSync(cacheRoot(), { recursive: true });
  const work = mkdtempSync(join(cacheRoot(), `.build-${set.name}-`));
  const out = join(work, "bin");
  mkdirSync(out);
  const cwd = buildDirFor(set, version, work);
  const flags = set.tags?.length ? ["-tags", set.tags.join(",")] : [];
  const total =
    go(["list", ...flags, "-deps", "-f", "{{.ImportPath}}", ...set.packages], cwd).split("\n").length - 1;
  const args = ["build", "-v", "-trimpath", ...flags];
  args.push(`-ldflags=${ldflags(set, version)}`, "-o", `${out}/`, ...set.packages);
  log(`${set.name} ${version}: compiling ${total} packages (cached ones are skipped)`);
  const child = spawn(goBinary(), args, { cwd, env: goEnv(), stdio: ["ignore", "ignore", "pipe"] });
  let compiled = 0;
  const errors: string[] = [];
  createInterface({ input: child.stderr }).on("line", (line) => {
    if (/^[\w.\-/]+$/.test(line)) compiled++;
    else errors.push(line);
  });
  const tick = setInterval(() => {
    const s = Math.round((Date.now() - started) / 1000);
    log(`${set.name}: ${compiled}/${total} packages compiled, ${Math.floor(s / 60)}m${s % 60}s`);
  }, 20_000);
  const code: number = await new Promise((resolve) => child.on("close", (c) => resolve(c ?? 1)));
  clearInterval(tick);
  if (code !== 0) {
    rmSync(work, { recursive: true, force: true });
    throw new Error(`building ${set.name} ${version} failed:\n${errors.slice(-40).join("\n")}`);
  }
  for (const [from, to] of Object.entries(RENAMES)) {
    if (existsSync(join(out, from))) renameSync(join(out, from), join(out, to));
  }
  const final = setDir(set);
  rmSync(final, { recursive: true, force: true });
  renameSync(out, final);
  rmSync(work, { recursive: true, force: true });
  log(`${set.name} ${version}: built in ${Math.round((Date.now() - started) / 1000)} s → ${final}`);
}

async function main(names: string[]) {
  const unknown = names.filter((n) => !BINARY_SETS.some((s) => s.name === n));
  if (unknown.length)
    throw new Error(
      `unknown binary set(s) ${unknown.join(", ")}; known: ${BINARY_SETS.map((s) => s.name).join(", ")}`,
    );
  const sets = BINARY_SETS.filter((s) => names.length === 0 || names.includes(s.name));
  const todo = sets.filter((s) => !isBuilt(s));
  for (const set of sets)
    if (!todo.includes(set)) log(`${set.name} ${pinnedVersion(set)}: cached in ${setDir(set)}`);
  // One set at a time: `go build` already uses every CPU.
  for (const set of todo) await buildSet(set);
}

main(process.argv.slice(2)).catch((err) => {
  log(err instanceof Error ? err.message : String(err));
  process.exit(1);
});
