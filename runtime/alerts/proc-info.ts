/**
 * The accessing process's executable and parent pid, read from procfs while the process
 * may still be alive. Everything read here is controlled by the (possibly hostile)
 * process: its name can hold spaces, parentheses and newlines, and its executable path any
 * bytes, so parsing is strict and every failure just leaves the field out.
 *
 * The agent runs with hostPID, so the kernel's tgid is a pid in this procfs. Lookups are
 * cached briefly per (tgid, comm): a burst of accesses by one process costs one read, and
 * an execve (which changes comm) or pid reuse after the TTL reads again.
 */
import { readFileSync, readlinkSync } from "node:fs";

export interface ProcInfo {
  exe?: string;
  ppid?: number;
}

export interface ProcReader {
  read(tgid: number, comm: string): ProcInfo;
}

/**
 * Field `n` (1-based, as in proc(5)) of /proc/<pid>/stat, for n ≥ 3. "pid (comm) state ppid ...":
 * comm may itself contain ") " and spaces, so the fields after it are found from the LAST ")".
 */
export function parseStatField(stat: string, n: number): string | undefined {
  const close = stat.lastIndexOf(")");
  if (close < 0 || n < 3) return undefined;
  const fields = stat
    .slice(close + 1)
    .trim()
    .split(" ");
  if (fields[0] === undefined || !/^[A-Za-z]$/.test(fields[0])) return undefined;
  return fields[n - 3];
}

/** Parent pid from the text of /proc/<pid>/stat, or undefined when it is not well formed. */
export function parseStatPpid(stat: string): number | undefined {
  const ppid = parseStatField(stat, 4);
  if (ppid === undefined || !/^\d{1,10}$/.test(ppid)) return undefined;
  const value = Number(ppid);
  return value <= 0x7fffffff ? value : undefined;
}

export interface ProcReaderOptions {
  /** Where the host's procfs is mounted; default /proc. */
  procRoot?: string;
  ttlMs?: number;
  maxEntries?: number;
}

export function createProcReader(options: ProcReaderOptions = {}): ProcReader {
  const root = options.procRoot ?? "/proc";
  const ttlMs = options.ttlMs ?? 2_000;
  const maxEntries = options.maxEntries ?? 4_096;
  const cache = new Map<string, { at: number; info: ProcInfo }>();
  return {
    read(tgid, comm) {
      if (!Number.isInteger(tgid) || tgid <= 0) return {};
      const key = `${tgid}\0${comm}`;
      const now = performance.now();
      const hit = cache.get(key);
      if (hit && now - hit.at < ttlMs) return hit.info;
      const info: ProcInfo = {};
      try {
        // readlink of a vanished process fails with ENOENT; of a kernel thread with ENOENT too.
        const exe = readlinkSync(`${root}/${tgid}/exe`, "utf8");
        if (exe.length > 0 && exe.length <= 4096) info.exe = exe;
      } catch {
        // Process gone or not ours to read: the alert carries no exe, by design.
      }
      try {
        const ppid = parseStatPpid(readFileSync(`${root}/${tgid}/stat`, "utf8"));
        if (ppid !== undefined) info.ppid = ppid;
      } catch {
        // Same: the field is optional and only filled while readable.
      }
      if (cache.size >= maxEntries) {
        // Maps iterate in insertion order: drop the oldest entry.
        const oldest = cache.keys().next();
        if (!oldest.done) cache.delete(oldest.value);
      }
      cache.set(key, { at: now, info });
      return info;
    },
  };
}

/** A reader that never touches procfs (tests, benchmarks, or when /proc is not the host's). */
export const noProcReader: ProcReader = { read: () => ({}) };
