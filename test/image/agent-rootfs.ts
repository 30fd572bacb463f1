/**
 * The agent image's filesystem, unpacked once per image id on the host from the build's
 * storage (buildah), for `ctr run --rootfs` in the test VMs: `ctr images import` of the
 * same image takes minutes of decompression under emulation.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { buildahStorageFlags } from "../../scripts/buildah-storage.ts";
import { REPO_ROOT } from "../kernel/vm.ts";

export interface BuiltImage {
  image: string;
  imageId: string;
  storage: { root: string; runroot: string; driver: string };
}

/** `prefix` keeps one unpacked tree per image kind: "rootfs-" (amd64), "arm64-rootfs-". */
export function agentRootfs(info: BuiltImage, prefix = "rootfs-"): string {
  const parent = join(REPO_ROOT, ".tmp", "image");
  const name = `${prefix}${info.imageId.slice(0, 12)}`;
  const dir = join(parent, name);
  if (existsSync(join(dir, ".hive-complete"))) return dir;
  for (const old of readdirSync(parent).filter((d) => d.startsWith(prefix))) {
    rmSync(join(parent, old), { recursive: true, force: true });
  }
  mkdirSync(dir, { recursive: true });
  const store = buildahStorageFlags(info.storage);
  const buildah = (args: string[]) =>
    execFileSync("buildah", [...store, ...args], { encoding: "utf8" }).trim();
  const container = buildah(["from", "--pull=never", info.image]);
  try {
    execFileSync("cp", ["-a", `${buildah(["mount", container])}/.`, dir]);
  } finally {
    buildah(["rm", container]);
  }
  writeFileSync(join(dir, ".hive-complete"), `${info.image} ${info.imageId}\n`);
  return dir;
}
