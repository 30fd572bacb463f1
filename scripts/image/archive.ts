/**
 * The build's products: the OCI archive `ctr images import` loads, and the record describing
 * it (.tmp/image/hive-agent.json), whose inputs hash tells whether the next build can be skipped.
 */
import { existsSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import type { BuildahStorage } from "../buildah-storage.ts";
import type { BuiltImage } from "./bud.ts";
import { describeImage } from "./describe.ts";
import { buildah, step } from "./run.ts";
import { archivePath, force, IMAGE, infoPath, storage } from "./settings.ts";

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

/** The last build's record, when it was made from the same inputs and its archive is whole. */
export function upToDate(inputsHash: string): AgentImageInfo | undefined {
  if (force || !existsSync(infoPath) || !existsSync(archivePath)) return undefined;
  const info = JSON.parse(readFileSync(infoPath, "utf8")) as AgentImageInfo;
  if (info.inputsHash !== inputsHash || statSync(archivePath).size !== info.archiveBytes) return undefined;
  return info;
}

/** Inspects the built image, exports it as the OCI archive and writes the record. */
export async function exportImage(
  built: BuiltImage,
  baseImages: Record<string, string>,
  inputsHash: string,
): Promise<AgentImageInfo> {
  const described = await step("inspecting the image", describeImage);
  const archiveRef = IMAGE;
  await step("exporting the OCI archive", () => exportArchive(archiveRef));
  const info: AgentImageInfo = {
    image: IMAGE,
    imageId: built.imageId,
    archive: archivePath,
    archiveRef,
    archiveBytes: statSync(archivePath).size,
    imageBytes: described.imageBytes,
    buildSeconds: built.buildSeconds,
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
  return info;
}

/** Written beside the archive and renamed onto it: an interrupted export leaves no short archive. */
async function exportArchive(archiveRef: string): Promise<void> {
  const partial = `${archivePath}.partial`;
  rmSync(partial, { force: true });
  // gzip layers (buildah compresses for oci-archive regardless of --disable-compression):
  // a third of the uncompressed size, and `ctr images import` measured no faster
  // without compression (it is bound by unpacking, not by gunzip).
  await buildah(["push", IMAGE, `oci-archive:${partial}:${archiveRef}`]);
  renameSync(partial, archivePath);
}
