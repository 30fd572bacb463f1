/**
 * The spool on a real, small tmpfs that fills up: a write cut short and then refused
 * (ENOSPC) must never leave a segment that reads back as corrupt, a record not yet on disk
 * is still readable from memory, and appending never throws.
 */
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { captureLogger } from "../../../test/alerts/fixtures.ts";
import { mountSmallTmpfs, type SmallDisk, tmpfsUnavailable } from "../../../test/alerts/tmpfs.ts";
import { openSpool, type Spool, type SpoolRecord } from "./spool.ts";

const disks: SmallDisk[] = [];
const spools: Spool[] = [];
afterEach(() => {
  for (const s of spools.splice(0)) {
    try {
      s.close();
    } catch {
      // Already closed by the test.
    }
  }
  for (const d of disks.splice(0)) d.unmount();
});

const record = (n: number): SpoolRecord => ({
  id: `00000000-0000-4000-8000-${String(n).padStart(12, "0")}`,
  url: "http://127.0.0.1:9/alerts",
  trapId: `trap-${n % 3}`,
  createdMs: 1_700_000_000_000 + n,
  body: JSON.stringify({ n, pad: "x".repeat(1_500) }),
});

const turn = () => new Promise((resolve) => setImmediate(resolve));

describe.skipIf(tmpfsUnavailable())("alert spool on a full disk", () => {
  it("resumes after a short write and ENOSPC without corrupting the segment, and reads unwritten records from memory", async () => {
    const disk = mountSmallTmpfs(256);
    disks.push(disk);
    const spoolDir = join(disk.dir, "spool");
    // Most of the disk is taken by someone else: the spool hits ENOSPC after a few records.
    const filler = join(disk.dir, "filler");
    writeFileSync(filler, Buffer.alloc(200 * 1024));
    const { logger } = captureLogger();
    const corrupt: string[] = [];
    const spool = openSpool({ dir: spoolDir, logger, maxBytes: 4 * 1024 * 1024, fsyncIntervalMs: 0 });
    spools.push(spool);
    const written: number[] = [];
    for (let n = 0; n < 60; n++) {
      expect(() => spool.append(record(n))).not.toThrow();
      written.push(n);
      // Batches of three records: the write that crosses the end of the disk is cut short.
      if (n % 3 === 2) await turn();
    }
    await turn();
    expect(spool.stats().writeError).toMatch(/ENOSPC/);
    // A record that could not be written is still delivered from memory.
    const late = spool.append(record(60));
    written.push(60);
    expect(late && "ref" in late).toBe(true);
    if (late && "ref" in late) expect(spool.read(late.ref)).toBe(record(60).body);

    // Space comes back: the spool writes what it held, after the partial bytes, consistently.
    rmSync(filler);
    spool.flush();
    expect(spool.stats().writeError).toBeUndefined();
    spool.close();

    const again = openSpool({ dir: spoolDir, logger, onCorrupt: (f) => corrupt.push(f) });
    spools.push(again);
    expect(corrupt).toEqual([]);
    expect(again.recovered.map((r) => r.id)).toEqual(written.map((n) => record(n).id));
    for (const r of again.recovered.slice(-3)) expect(again.read(r.ref)).toMatch(/^\{"n":\d+,/);
  });
});
