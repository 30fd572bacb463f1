/**
 * Where the image build reads and writes, and the flags it was started with
 * (`--arm64`, `--force`, `--verbose`).
 */
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const root = join(dirname(fileURLToPath(import.meta.url)), "../..");

/** The agent image's tag in the buildah storage. */
export const IMAGE = "localhost/hive-agent:test";
export const outDir = join(root, ".tmp/image");
export const archivePath = join(outDir, "hive-agent.tar");
export const infoPath = join(outDir, "hive-agent.json");
export const logPath = join(outDir, "build.log");
export const cacheDir =
  process.env.HIVE_IMAGE_CACHE ??
  (process.getuid?.() === 0
    ? "/var/cache/hive-image"
    : join(process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "hive-image"));
export const storage = { root: join(cacheDir, "storage"), runroot: join(cacheDir, "run"), driver: "vfs" };

export const verbose = process.argv.includes("--verbose");
export const force = process.argv.includes("--force");
export const arm64 = process.argv.includes("--arm64");
