/**
 * A small real tmpfs for fault injection (a disk that fills up): mounted on a fresh
 * directory, unmounted and removed by the returned function. Needs root; `available`
 * says why not when it cannot be mounted, so a test can skip with that reason.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface SmallDisk {
  dir: string;
  unmount(): void;
}

export function mountSmallTmpfs(sizeKiB = 256): SmallDisk {
  const dir = mkdtempSync(join(tmpdir(), "hive-small-disk-"));
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", `size=${sizeKiB}k`, "tmpfs", dir], { stdio: "pipe" });
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    dir,
    unmount() {
      try {
        execFileSync("umount", ["-l", dir], { stdio: "pipe" });
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

/** Why a tmpfs cannot be mounted here (not root), or undefined when it can. */
export function tmpfsUnavailable(): string | undefined {
  if (process.getuid?.() !== 0) return "mounting a tmpfs needs root";
  return undefined;
}
