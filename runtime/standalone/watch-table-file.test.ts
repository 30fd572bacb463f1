import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  liveWriterOf,
  readWatchTableFile,
  type WatchTableFile,
  watchTableFileFor,
  writeWatchTableFile,
} from "./watch-table-file.ts";

const table = (pid: number): WatchTableFile => ({
  writer: "standalone",
  pid,
  startedAt: "2026-01-01T00:00:00Z",
  updatedAt: "2026-01-01T00:00:00Z",
  attachMode: "kprobe",
  kernelId: "k",
  slots: [{ slot: 1, kind: "file", device: "0:30", inode: "3", traps: [] }],
});

describe("the watch table", () => {
  it("lives beside its pin root's name and round-trips, readable by its owner only", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hive-table-"));
    const file = watchTableFileFor("/sys/fs/bpf/hive-standalone", dir);
    expect(file).toBe(join(dir, "hive-standalone.watch-table.json"));
    await writeWatchTableFile(file, table(123));
    expect(await readWatchTableFile(file)).toEqual(table(123));
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(await readWatchTableFile(join(dir, "none.json"))).toBeUndefined();
  });

  it("names a live writer, but not this process nor one that is gone", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hive-table-"));
    const file = join(dir, "t.json");
    await writeWatchTableFile(file, table(process.ppid));
    expect(await liveWriterOf(file)).toBe(process.ppid);
    await writeWatchTableFile(file, table(process.pid));
    expect(await liveWriterOf(file)).toBeUndefined();
    const gone = spawnSync("true").pid;
    await writeWatchTableFile(file, table(gone));
    expect(JSON.parse(readFileSync(file, "utf8")).pid).toBe(gone);
    expect(await liveWriterOf(file)).toBeUndefined();
  });
});
