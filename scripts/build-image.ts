/**
 * Builds the agent image from the Dockerfile without Docker and without an image registry,
 * and exports it as an OCI archive that `ctr images import` (containerd) loads:
 *
 *   npm run image -- [--arm64] [--force] [--verbose]     (node scripts/build-image.ts under Node 24)
 *
 * 1. Local stand-ins for the two public base images, tagged with exactly the names the
 *    Dockerfile's ARG defaults use: Debian made by mmdebstrap (minbase, from this host's Debian
 *    mirror), and that plus Node (the binary the `node` npm package installed here) and npm
 *    (packed from the npm registry). Rebuilt only when their inputs change
 *    (image/standin.ts, image/debian-standin.ts, image/node-standin.ts).
 * 2. `buildah bud` of the unchanged Dockerfile (vfs storage, chroot isolation: no daemon),
 *    `--pull=never` so that nothing is fetched from a registry (image/bud.ts).
 * 3. `buildah push` to .tmp/image/hive-agent.tar, plus .tmp/image/hive-agent.json describing it
 *    (image/archive.ts).
 * 4. With --arm64, the linux/arm64 image too, assembled from that one's /app without running
 *    arm64 binaries (scripts/image-arm64.ts): .tmp/image/hive-agent-arm64.tar and .json.
 *
 * The whole build is skipped when a hash over its inputs (image/inputs.ts) equals the one
 * recorded with the last successful build. The host's npm registry, Debian mirror and CA bundle are read at run time
 * and reach only the build steps (a build argument, a read-only mount), never the image.
 * Needs root and the Debian packages buildah and mmdebstrap (scripts/debian-packages.txt).
 * HIVE_IMAGE_CACHE overrides where base images, the buildah storage and downloads are kept.
 */
import { mkdirSync } from "node:fs";
import { relative } from "node:path";
import { type AgentImageInfo, exportImage, upToDate } from "./image/archive.ts";
import { buildImage } from "./image/bud.ts";
import { debianStandin } from "./image/debian-standin.ts";
import { baseImageNames } from "./image/dockerfile.ts";
import { hashInputs } from "./image/inputs.ts";
import { lock } from "./image/lock.ts";
import { nodeStandin } from "./image/node-standin.ts";
import { closeLog, imageId, openLog, run, StepError, say, seconds, step } from "./image/run.ts";
import { archivePath, arm64, force, IMAGE, outDir, root } from "./image/settings.ts";

// The steps' helpers, as scripts/image-arm64.ts and the image tests use them.
export type { AgentImageInfo } from "./image/archive.ts";
export { debianSources } from "./image/debian-sources.ts";
export { slimDebianOptions } from "./image/debian-standin.ts";
export { describeImage, type ImageConfig } from "./image/describe.ts";
export { fileSha256, sha256 } from "./image/inputs.ts";
export { nodeBinary, npmTarball } from "./image/node-standin.ts";
export { buildah, imageId, run, StepError, say, seconds, step, workingContainers } from "./image/run.ts";
export { cacheDir, outDir, root, storage } from "./image/settings.ts";

async function main(): Promise<void> {
  const started = performance.now();
  mkdirSync(outDir, { recursive: true });
  await step("checking prerequisites", checkPrerequisites);
  const release = await lock();
  try {
    openLog();
    const baseImages = await baseImageStandins();
    const inputsHash = await step("hashing inputs", async () => hashInputs(baseImages));
    const current = upToDate(inputsHash);
    if (current && (await imageId(IMAGE)) === current.imageId) {
      say(
        `up to date (${relative(root, archivePath)}, inputs ${inputsHash.slice(0, 12)}): ${seconds(started)} s`,
      );
      await alsoArm64(current);
      return;
    }
    const built = await buildImage();
    const info = await exportImage(built, baseImages, inputsHash);
    const mib = (n: number) => `${(n / 2 ** 20).toFixed(1)} MiB`;
    say(
      `built ${IMAGE} in ${built.buildSeconds} s (image ${mib(info.imageBytes)}, archive ${mib(info.archiveBytes)}); total ${seconds(started)} s`,
    );
    await alsoArm64(info);
  } finally {
    release();
    closeLog();
  }
}

async function checkPrerequisites(): Promise<void> {
  if (process.getuid?.() !== 0) throw new Error("buildah (vfs, chroot isolation) and mmdebstrap need root");
  for (const tool of ["buildah", "mmdebstrap"])
    await run(tool, ["--version"]).catch(() => {
      throw new Error(`${tool} is missing: install scripts/debian-packages.txt (scripts/bootstrap.sh does)`);
    });
}

/** The two base images' local stand-ins (made or reused): normalised name → image id. */
async function baseImageStandins(): Promise<Record<string, string>> {
  const { debianName, suite, nodeName, major } = baseImageNames();
  const debianId = await step("Debian base image", () => debianStandin(debianName, suite), true);
  const nodeId = await step("Node base image", () => nodeStandin(nodeName, debianId, major), true);
  return { [debianName]: debianId, [nodeName]: nodeId };
}

async function alsoArm64(info: AgentImageInfo): Promise<void> {
  if (!arm64) return;
  const { assembleArm64 } = await import("./image-arm64.ts");
  await assembleArm64(info, force);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((error: Error) => {
    say(`FAILED: ${error instanceof StepError ? error.message : (error.stack ?? error.message)}`);
    process.exitCode = 1;
  });
}
