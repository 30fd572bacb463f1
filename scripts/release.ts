/**
 * `npm run release`: everything a user installs Hive from, built from what a clean clone holds
 * (the files git tracks or would add; nothing ignored, such as a stale dist/, reaches it).
 * See `--help` below and docs/operations.md#installing-from-the-release-files.
 */
import { execFile, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { type BuildahStorage, buildahStorageFlags } from "./buildah-storage.ts";
import { productionSbom } from "./release-sbom.ts";

const exec = promisify(execFile);
const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
  name: string;
  version: string;
};
const version = manifest.version;

/** The files of a release, by name (also what `--help` lists). */
export const RELEASE_FILES = {
  package: `${manifest.name.replace(/^@/, "").replace("/", "-")}-${version}.tgz`,
  image: `hive-agent-${version}-linux-amd64.tar`,
  imageArm64: `hive-agent-${version}-linux-arm64.tar`,
  crds: "crds.yaml",
  install: "hive.yaml",
  config: "hive-config.yaml",
  sbom: `hive-${version}.cdx.json`,
  sums: "SHA256SUMS",
} as const;

/** The image reference recorded in the OCI archive, and the one hive.yaml runs. */
export const RELEASE_IMAGE = `localhost/hive:${version}`;

/** The documented default configuration hive.yaml is rendered from (the user story, alerts on stdout). */
export const RELEASE_CONFIG = `# The HiveMonitor options hive.yaml was rendered from. Edit and render again with
#   npx hive render --config hive-config.yaml --skip-crds > hive.yaml
# (from the installed package), e.g. to name your registry's copy of the image or a callback:
#   callback: { url: "https://alerts.example.com/hive" }
image: ${RELEASE_IMAGE}
traps:
  - path: /etc/shadow
    match:
      matchLabels:
        security: high
`;

const help = `Usage: npm run release -- [--out DIR] [--skip-image]

Builds, from the files a clean clone of this repository holds, everything a user installs
Hive from, into release/ (or DIR):

  ${RELEASE_FILES.package.padEnd(36)}the npm package (\`npm pack\`): compiled JavaScript and .d.ts,
  ${"".padEnd(36)}the compiled BPF program (bpf/hive.bpf.o for amd64,
  ${"".padEnd(36)}bpf/hive.arm64.bpf.o for arm64), the \`hive\` command,
  ${"".padEnd(36)}the JSON Schemas and the Pulumi plugin (plugin/)
  ${RELEASE_FILES.image.padEnd(36)}the agent image for linux/amd64, an OCI archive whose image
  ${"".padEnd(36)}is named ${RELEASE_IMAGE} (built by scripts/build-image.ts)
  ${RELEASE_FILES.imageArm64.padEnd(36)}the same for linux/arm64, under the same name (assembled from the
  ${"".padEnd(36)}amd64 one by scripts/image-arm64.ts)
  ${RELEASE_FILES.crds.padEnd(36)}the HivePolicy and HiveData CRDs (\`hive render --only crds\`)
  ${RELEASE_FILES.install.padEnd(36)}everything else (\`hive render --skip-crds\`) for ${RELEASE_FILES.config}
  ${RELEASE_FILES.config.padEnd(36)}that configuration: image ${RELEASE_IMAGE}, /etc/shadow
  ${"".padEnd(36)}trapped in pods labelled security=high, alerts on the agents' stdout
  ${RELEASE_FILES.sbom.padEnd(36)}CycloneDX SBOM of the package and its production dependencies
  ${RELEASE_FILES.sums.padEnd(36)}SHA-256 of every file above (\`sha256sum -c SHA256SUMS\`)

Install from them:
  sha256sum -c SHA256SUMS
  npm install ./${RELEASE_FILES.package} @pulumi/pulumi @pulumi/kubernetes   # Pulumi (TypeScript)
  ctr -n k8s.io images import ${RELEASE_FILES.image}     # on every amd64 node; or push it to a registry
  ctr -n k8s.io images import ${RELEASE_FILES.imageArm64}     # on every arm64 node
  kubectl apply -f ${RELEASE_FILES.crds}
  kubectl wait --for=condition=Established crd/hivepolicies.hive-operator.com crd/hivedata.hive-operator.com
  kubectl apply -f ${RELEASE_FILES.install}

Options:
  --out DIR      write the files to DIR instead of release/ (its earlier release files are replaced)
  --skip-image   leave the images out (they need root, buildah and mmdebstrap: see \`npm run image\`)

Needs: git, npm, clang (bpf/build.sh); for the images also what \`npm run image\` needs, on an
amd64 machine (the arm64 image is assembled there without running arm64 code).`;

function say(message: string): void {
  process.stderr.write(`hive-release: ${message}\n`);
}

async function run(cmd: string, args: string[], cwd: string): Promise<string> {
  const { stdout } = await exec(cmd, args, { cwd, maxBuffer: 256 * 1024 * 1024 }).catch(
    (e: { stderr?: string; message: string }) => {
      throw new Error(`${cmd} ${args.join(" ")} failed: ${e.stderr?.trim() || e.message}`);
    },
  );
  return stdout;
}

/** The repository's files as a fresh clone plus the working tree's changes has them, copied to `stage`. */
async function stageClone(stage: string): Promise<void> {
  const listed = await run("git", ["ls-files", "-z", "--cached", "--others", "--exclude-standard"], root);
  for (const file of listed.split("\0").filter((f) => f !== "")) {
    const from = join(root, file);
    if (!existsSync(from) || !statSync(from).isFile()) continue; // deleted in the working tree
    mkdirSync(dirname(join(stage, file)), { recursive: true });
    copyFileSync(from, join(stage, file));
  }
  // The installed dependencies (`npm ci` of this clone), for the build's compiler and the render.
  symlinkSync(join(root, "node_modules"), join(stage, "node_modules"));
}

function sha256(path: string): string {
  return createHash("sha256").update(readFileSync(path)).digest("hex");
}

/** The agent images from scripts/build-image.ts (amd64, and arm64 from it), each pushed to its archive under RELEASE_IMAGE. */
async function imageArchives(archives: { amd64: string; arm64: string }): Promise<void> {
  if (process.arch !== "x64") throw new Error(`the images are built on amd64 (this is ${process.arch})`);
  await new Promise<void>((done, fail) => {
    const child = spawn(process.execPath, [join(root, "scripts/build-image.ts"), "--arm64"], {
      cwd: root,
      stdio: "inherit",
    });
    child.on("error", fail);
    child.on("close", (code) => (code === 0 ? done() : fail(new Error(`npm run image exited with ${code}`))));
  });
  for (const [arch, archive] of Object.entries(archives)) {
    const infoFile = arch === "arm64" ? "hive-agent-arm64.json" : "hive-agent.json";
    const info = JSON.parse(readFileSync(join(root, ".tmp/image", infoFile), "utf8")) as {
      image: string;
      storage: BuildahStorage;
    };
    await run(
      "buildah",
      [...buildahStorageFlags(info.storage), "push", info.image, `oci-archive:${archive}:${RELEASE_IMAGE}`],
      root,
    );
  }
}

export interface ReleaseOptions {
  out: string;
  skipImage: boolean;
}

export async function release({ out, skipImage }: ReleaseOptions): Promise<string[]> {
  const started = performance.now();
  const step = (name: string) => say(`${name} (${Math.round((performance.now() - started) / 1000)} s)`);
  mkdirSync(out, { recursive: true });
  for (const name of readdirSync(out))
    if (Object.values(RELEASE_FILES).includes(name as never) || /^hive-.*\.(tgz|tar)$/.test(name))
      rmSync(join(out, name), { force: true });
  const stage = mkdtempSync(join(tmpdir(), "hive-release-"));
  try {
    await stageClone(stage);
    step("staged the clone");
    await run("sh", ["bpf/build.sh"], stage);
    step("compiled bpf/hive.bpf.o and bpf/hive.arm64.bpf.o");
    // `npm pack` runs prepack (`npm run build`): dist/ made afresh from the staged sources.
    const packed = JSON.parse(
      await run("npm", ["pack", "--json", "--loglevel=error", "--pack-destination", resolve(out)], stage),
    ) as { filename: string }[];
    if (packed[0]?.filename !== RELEASE_FILES.package)
      throw new Error(`npm pack wrote ${packed[0]?.filename}, not ${RELEASE_FILES.package}`);
    step(`packed ${RELEASE_FILES.package}`);
    writeFileSync(join(out, RELEASE_FILES.config), RELEASE_CONFIG);
    const hive = join(stage, "dist/runtime/cli/main.js");
    const config = join(out, RELEASE_FILES.config);
    for (const [file, flags] of [
      [RELEASE_FILES.crds, ["--only", "crds"]],
      [RELEASE_FILES.install, ["--skip-crds"]],
    ] as const)
      writeFileSync(
        join(out, file),
        await run(process.execPath, [hive, "render", "--config", config, ...flags], stage),
      );
    step("rendered the install manifests");
    const sbom = await run(
      "npm",
      ["sbom", "--package-lock-only", "--sbom-format", "cyclonedx", "--sbom-type", "library"],
      stage,
    );
    const lock = JSON.parse(readFileSync(join(stage, "package-lock.json"), "utf8"));
    writeFileSync(
      join(out, RELEASE_FILES.sbom),
      `${JSON.stringify(productionSbom(JSON.parse(sbom), lock, manifest), null, 2)}\n`,
    );
    step("wrote the SBOM");
    if (!skipImage) {
      await imageArchives({
        amd64: join(out, RELEASE_FILES.image),
        arm64: join(out, RELEASE_FILES.imageArm64),
      });
      step(`exported ${RELEASE_FILES.image} and ${RELEASE_FILES.imageArm64}`);
    }
    const files = Object.values(RELEASE_FILES).filter(
      (f) => f !== RELEASE_FILES.sums && existsSync(join(out, f)),
    );
    writeFileSync(
      join(out, RELEASE_FILES.sums),
      files
        .sort()
        .map((f) => `${sha256(join(out, f))}  ${f}\n`)
        .join(""),
    );
    step(
      `wrote ${RELEASE_FILES.sums}: ${relative(process.cwd(), out) || "."} holds ${files.length + 1} files`,
    );
    return [...files, RELEASE_FILES.sums].sort();
  } finally {
    rmSync(stage, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const args = process.argv.slice(2);
  if (args.includes("--help") || args.includes("-h")) {
    process.stdout.write(`${help}\n`);
  } else {
    const at = args.indexOf("--out");
    const out = at === -1 ? join(root, "release") : resolve(args[at + 1] ?? "");
    const known = new Set(["--out", "--skip-image", ...(at === -1 ? [] : [args[at + 1]])]);
    const unknown = args.filter((a) => !known.has(a));
    if (unknown.length > 0 || (at !== -1 && !args[at + 1])) {
      process.stderr.write(`${help}\n\nunknown or incomplete arguments: ${unknown.join(" ") || "--out"}\n`);
      process.exitCode = 2;
    } else {
      release({ out, skipImage: args.includes("--skip-image") }).catch((error: Error) => {
        say(`FAILED: ${error.message}`);
        process.exitCode = 1;
      });
    }
  }
}
