/**
 * One agent per spool directory. Two agents on one hostPath (a DaemonSet rolled with
 * maxSurge, a standalone `hive watch` beside the agent) would deliver each other's alerts
 * and interleave their acknowledgements. The lock file names the holder by pid and process
 * start time (field 22 of /proc/<pid>/stat), so a lock left by a dead agent — or one whose
 * pid was reused by another process — is recognised as stale and taken over.
 */
import { closeSync, openSync, readFileSync, unlinkSync, writeSync } from "node:fs";
import { join } from "node:path";
import { HiveError } from "../../../api/errors.ts";
import { parseStatField } from "../proc-stat.ts";

export const LOCK_FILE = "spool.lock";

function startTime(pid: number): string | undefined {
  try {
    return parseStatField(readFileSync(`/proc/${pid}/stat`, "utf8"), 22);
  } catch {
    return undefined;
  }
}

/** Takes the directory's lock or throws a HiveError naming the holder; returns the release function. */
export function acquireSpoolLock(dir: string): () => void {
  const path = join(dir, LOCK_FILE);
  const me = JSON.stringify({ pid: process.pid, start: startTime(process.pid) ?? "" });
  for (let attempt = 0; attempt < 3; attempt++) {
    let fd: number;
    try {
      fd = openSync(path, "wx", 0o600);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") {
        throw new HiveError("ConfigInvalid", "cannot create the alert spool lock", {
          object: path,
          cause: error,
        });
      }
      let holder: { pid?: unknown; start?: unknown } = {};
      try {
        holder = JSON.parse(readFileSync(path, "utf8"));
      } catch {
        // Unreadable or half-written lock: treat as stale.
      }
      const pid = typeof holder.pid === "number" ? holder.pid : undefined;
      if (pid !== undefined && holder.start !== "" && startTime(pid) === holder.start) {
        throw new HiveError("ConfigInvalid", "the alert spool directory is in use by another Hive process", {
          object: dir,
          hint: `process ${pid} holds ${LOCK_FILE}; give each agent its own spool directory`,
          holderPid: pid,
        });
      }
      try {
        unlinkSync(path);
      } catch {
        // Another process removed it first; try again.
      }
      continue;
    }
    writeSync(fd, me);
    closeSync(fd);
    return () => {
      try {
        if (readFileSync(path, "utf8") === me) unlinkSync(path);
      } catch {
        // Already gone.
      }
    };
  }
  throw new HiveError("ConfigInvalid", "cannot take the alert spool lock", {
    object: dir,
    hint: "another process keeps re-creating the lock; give each agent its own spool directory",
  });
}
