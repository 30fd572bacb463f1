/**
 * The images a test node's containerd imports, as OCI archives (no registry is reachable): the
 * agent image (scripts/build-image.ts, as `npm run release` ships it), the pod sandbox image (built
 * here from guest/pause.c), and a workload image: the Debian bookworm-slim stand-in the agent
 * image is built on, under the name the README's `kubectl run` uses.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { buildahStorageFlags } from "../../scripts/buildah-storage.ts";
import { type AgentImageInfo, ensureAgentImage } from "../image/agent-image.ts";

const root = join(import.meta.dirname, "../..");
const OUT = join(root, ".tmp/cluster-images");
export const PAUSE_IMAGE = "registry.k8s.io/pause:3.10";
export const WORKLOAD_IMAGE = "docker.io/library/debian:bookworm-slim";

export interface NodeImages {
  agent: AgentImageInfo;
  /** OCI archives for `ctr -n k8s.io images import`. */
  archives: { agent: string; pause: string; workload: string };
}

function buildah(info: AgentImageInfo, args: string[]): string {
  return execFileSync("buildah", [...buildahStorageFlags(info.storage), ...args], {
    encoding: "utf8",
  }).trim();
}

function pauseArchive(info: AgentImageInfo): string {
  const source = join(import.meta.dirname, "guest/pause.c");
  const archive = join(OUT, "pause.tar");
  if (existsSync(archive) && statSync(archive).mtimeMs > statSync(source).mtimeMs) return archive;
  const binary = join(OUT, "pause");
  execFileSync("clang", ["-static", "-O2", "-o", binary, source]);
  const ctr = buildah(info, ["from", "scratch"]);
  try {
    buildah(info, ["copy", ctr, binary, "/pause"]);
    buildah(info, ["config", "--entrypoint", '["/pause"]', "--cmd", "", ctr]);
    buildah(info, ["commit", "--quiet", ctr, "localhost/hive-test-pause:latest"]);
  } finally {
    buildah(info, ["rm", ctr]);
  }
  buildah(info, [
    "push",
    "--quiet",
    "localhost/hive-test-pause:latest",
    `oci-archive:${archive}:${PAUSE_IMAGE}`,
  ]);
  return archive;
}

function workloadArchive(info: AgentImageInfo): string {
  const archive = join(OUT, "workload.tar");
  const debian = Object.keys(info.baseImages).find((n) => n.includes("debian"));
  if (!debian)
    throw new Error(`the agent image records no Debian base image: ${JSON.stringify(info.baseImages)}`);
  if (existsSync(archive) && statSync(archive).mtimeMs > statSync(info.archive).mtimeMs) return archive;
  buildah(info, ["push", "--quiet", debian, `oci-archive:${archive}:${WORKLOAD_IMAGE}`]);
  return archive;
}

/** Builds what is missing (the agent image only when its inputs changed) and returns the archives. */
export async function ensureNodeImages(): Promise<NodeImages> {
  const agent = await ensureAgentImage();
  mkdirSync(OUT, { recursive: true });
  return {
    agent,
    archives: { agent: agent.archive, pause: pauseArchive(agent), workload: workloadArchive(agent) },
  };
}
