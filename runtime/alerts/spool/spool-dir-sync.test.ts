/**
 * A segment created or deleted is made durable in its directory too (fsync of the
 * directory), not only its data: otherwise a machine crash can lose a segment's name.
 */
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { captureLogger } from "../../../test/alerts/fixtures.ts";

const synced: string[] = [];
vi.mock("node:fs", async (importOriginal) => {
  const real = await importOriginal<typeof import("node:fs")>();
  const kind = (fd: number) => (real.fstatSync(fd).isDirectory() ? "dir" : "file");
  return {
    ...real,
    fsyncSync: (fd: number) => {
      synced.push(kind(fd));
      real.fsyncSync(fd);
    },
    fsync: (fd: number, cb: (error: NodeJS.ErrnoException | null) => void) => {
      synced.push(kind(fd));
      real.fsync(fd, cb);
    },
  };
});

const { openSpool } = await import("./spool.ts");
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

describe("alert spool directory durability", () => {
  it("fsyncs the directory after a segment is created and after one is deleted", () => {
    const dir = fs.mkdtempSync(join(tmpdir(), "hive-spool-dirsync-"));
    dirs.push(dir);
    const { logger } = captureLogger();
    const spool = openSpool({ dir, logger, segmentBytes: 4096, fsyncIntervalMs: 0 });
    synced.length = 0;
    const refs = [];
    for (let n = 0; n < 40; n++) {
      const r = spool.append({
        id: `id-${n}`,
        url: "http://127.0.0.1:9/a",
        trapId: "t",
        createdMs: 0,
        body: "x".repeat(300),
      });
      if ("ref" in r) refs.push(r.ref);
    }
    spool.flush();
    expect(synced).toContain("dir");
    synced.length = 0;
    // All delivered: the full segments are deleted, and the directory synced again.
    for (const ref of refs) spool.ack(ref);
    expect(synced).toContain("dir");
    spool.close();
  });
});
