/**
 * A FUSE filesystem that never answers: a shell opens /dev/fuse, mounts it with that descriptor
 * and then sleeps without ever reading a request, so every lookup under the mount waits in the
 * kernel, as on a FUSE or NFS mount whose server is gone. When the holder exits the kernel
 * aborts the connection and the waiting lookups fail with ENOTCONN.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { accessSync, constants, existsSync } from "node:fs";
import type { Availability } from "../fixtures/suite-gate.ts";

export function hungFuseAvailable(): Availability {
  if (process.getuid?.() !== 0) return { ok: false, why: "mounting a FUSE filesystem needs root" };
  if (!existsSync("/usr/bin/mount")) return { ok: false, why: "/usr/bin/mount is missing" };
  try {
    accessSync("/dev/fuse", constants.R_OK | constants.W_OK);
  } catch {
    return { ok: false, why: "/dev/fuse cannot be opened (no fuse module, or not in this container)" };
  }
  return { ok: true };
}

export interface HungMount {
  dir: string;
  holder: ChildProcess;
  /** Ends the holder (lookups under the mount then fail) and detaches the mount; idempotent. */
  release(): void;
}

/** Mounts the never-answering filesystem at `dir`; the holder exits on its own after `holdS` seconds. */
export async function mountHungFuse(dir: string, holdS: number): Promise<HungMount> {
  const holder = spawn(
    "sh",
    [
      "-c",
      'exec 3<>/dev/fuse; mount -i -t fuse -o fd=3,rootmode=40000,user_id=0,group_id=0 hive-hung "$0" || exit 1; echo mounted; exec sleep "$1"',
      dir,
      String(holdS),
    ],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    holder.kill("SIGKILL");
    try {
      execFileSync("umount", ["-l", dir], { stdio: "ignore" });
    } catch {
      // never mounted, or already detached
    }
  };
  await new Promise<void>((resolve, reject) => {
    holder.stdout?.once("data", () => resolve());
    holder.once("exit", (code) => reject(new Error(`mounting the hung FUSE filesystem failed (${code})`)));
  }).catch((error) => {
    release();
    throw error;
  });
  return { dir, holder, release };
}
