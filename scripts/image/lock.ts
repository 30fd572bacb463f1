/** One build at a time per cache (two test processes may ask at once). */
import { closeSync, mkdirSync, openSync, readFileSync, rmSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { say } from "./run.ts";
import { cacheDir } from "./settings.ts";

/** Waits for the cache's build lock and takes it; returns its release. A dead holder's lock is taken over. */
export async function lock(): Promise<() => void> {
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
      if (!isAlive(holder)) {
        rmSync(path, { force: true });
        continue;
      }
      if (waited === 0) say(`waiting for the build of process ${holder}`);
      await new Promise((r) => setTimeout(r, 2000));
    }
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
