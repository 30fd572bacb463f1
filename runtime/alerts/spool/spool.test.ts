import { appendFileSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { captureLogger } from "../../../test/alerts/fixtures.ts";
import { openSpool, type SpoolRecord, type SpoolRef, spoolDiskBytes } from "./spool.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function setup() {
  const dir = mkdtempSync(join(tmpdir(), "hive-spool-unit-"));
  dirs.push(dir);
  const { logger, lines: logs } = captureLogger();
  return { dir, logs, logger };
}

const record = (n: number, body = `{"n":${n},"pad":"${"x".repeat(100)}"}`): SpoolRecord => ({
  id: `00000000-0000-4000-8000-${String(n).padStart(12, "0")}`,
  url: "http://127.0.0.1:9/alerts",
  trapId: `trap-${n % 3}`,
  createdMs: 1_700_000_000_000 + n,
  body,
});

const segmentFiles = (dir: string) =>
  readdirSync(dir)
    .filter((f) => f.endsWith(".log"))
    .sort();

describe("alert spool", () => {
  it("returns after a restart exactly the records not acknowledged, in order", () => {
    const { dir, logger } = setup();
    const spool = openSpool({ dir, logger, segmentBytes: 4096 });
    const refs = Array.from({ length: 100 }, (_, n) => spool.append(record(n)));
    for (const [n, r] of refs.entries()) if (n % 2 === 0 && "ref" in r) spool.ack(r.ref);
    spool.close();
    const again = openSpool({ dir, logger, segmentBytes: 4096 });
    expect(again.recovered.map((r) => r.id)).toEqual(
      Array.from({ length: 50 }, (_, i) => record(i * 2 + 1).id),
    );
    expect(again.read(again.recovered[0]?.ref as SpoolRef)).toBe(record(1).body);
    expect(again.stats().pending).toBe(50);
    again.close();
  });

  it("deletes segments whose records are all acknowledged", () => {
    const { dir, logger } = setup();
    const spool = openSpool({ dir, logger, segmentBytes: 4096 });
    const refs = Array.from({ length: 200 }, (_, n) => spool.append(record(n)));
    spool.flush();
    const before = segmentFiles(dir).length;
    expect(before).toBeGreaterThan(3);
    for (const r of refs) if ("ref" in r) spool.ack(r.ref);
    spool.close();
    expect(segmentFiles(dir)).toEqual([]);
    expect(spoolDiskBytes(dir)).toBe(0);
  });

  it("stays within its byte bound by dropping the oldest segment and reporting its undelivered records", () => {
    const { dir, logger } = setup();
    const drops: { segment: number; undelivered: number }[] = [];
    const maxBytes = 32 * 1024;
    const spool = openSpool({
      dir,
      logger,
      maxBytes,
      segmentBytes: 4096,
      onDrop: ({ segment, undelivered }) => drops.push({ segment, undelivered }),
    });
    for (let n = 0; n < 1000; n++) {
      spool.append(record(n));
      expect(spool.stats().bytes).toBeLessThanOrEqual(maxBytes);
    }
    spool.flush();
    expect(spoolDiskBytes(dir)).toBeLessThanOrEqual(maxBytes);
    const dropped = drops.reduce((s, d) => s + d.undelivered, 0);
    expect(dropped + spool.stats().pending).toBe(1000);
    spool.close();
    // The survivors are the newest records.
    const again = openSpool({ dir, logger, maxBytes, segmentBytes: 4096 });
    expect(again.recovered.map((r) => r.id)).toEqual(
      Array.from({ length: 1000 - dropped }, (_, i) => record(dropped + i).id),
    );
    again.close();
  });

  it("ignores a torn record at the end of a segment with a warning and keeps the complete ones", () => {
    const { dir, logger, logs } = setup();
    const spool = openSpool({ dir, logger });
    for (let n = 0; n < 5; n++) spool.append(record(n));
    spool.close();
    const [file] = segmentFiles(dir);
    const path = join(dir, file as string);
    // The first 30 bytes of a sixth record: what a crash in the middle of write(2) leaves.
    const whole = readFileSync(path);
    appendFileSync(path, whole.subarray(0, 30));
    const again = openSpool({ dir, logger });
    expect(again.recovered.map((r) => r.id)).toEqual([0, 1, 2, 3, 4].map((n) => record(n).id));
    expect(logs.some((l) => l.level === "warn" && String(l.msg).includes("torn record"))).toBe(true);
    expect(logs.some((l) => l.level === "error")).toBe(false);
    again.close();
  });

  it("detects a corrupt segment, logs an error, keeps the records before the damage and skips the rest", () => {
    const { dir, logger, logs } = setup();
    const corrupt: string[] = [];
    const spool = openSpool({ dir, logger });
    for (let n = 0; n < 6; n++) spool.append(record(n));
    spool.close();
    const [file] = segmentFiles(dir);
    const path = join(dir, file as string);
    const data = readFileSync(path);
    const recordBytes = data.length / 6;
    // Flip one byte inside the payload of the third record.
    const at = Math.floor(recordBytes * 2 + recordBytes / 2);
    data[at] = (data[at] as number) ^ 0xff;
    writeFileSync(path, data);
    const again = openSpool({ dir, logger, onCorrupt: (f) => corrupt.push(f) });
    expect(again.recovered.map((r) => r.id)).toEqual([record(0).id, record(1).id]);
    expect(corrupt).toEqual([file]);
    const error = logs.find((l) => l.level === "error");
    expect((error?.error as { code?: string } | undefined)?.code).toBe("SpoolCorrupt");
    again.close();
  });

  it("skips a file that is not a spool segment at all without crashing", () => {
    const { dir, logger, logs } = setup();
    writeFileSync(join(dir, "seg-0000000000000007.log"), "this is not a spool file\n".repeat(20));
    const spool = openSpool({ dir, logger });
    expect(spool.recovered).toEqual([]);
    expect(logs.some((l) => l.level === "error")).toBe(true);
    // New records go to a newer segment and survive a restart.
    const r = spool.append(record(1));
    spool.flush();
    expect("ref" in r && r.ref.segment).toBe(8);
    spool.close();
    const again = openSpool({ dir, logger });
    expect(again.recovered.map((x) => x.id)).toEqual([record(1).id]);
    again.close();
  });

  it("syncs in the background while segments rotate and are deleted, losing nothing", async () => {
    const { dir, logger, logs } = setup();
    const spool = openSpool({ dir, logger, segmentBytes: 4096, fsyncIntervalMs: 2 });
    const kept: string[] = [];
    for (let n = 0; n < 600; n++) {
      const r = spool.append(record(n));
      if (n % 3 === 0) kept.push(record(n).id);
      else if ("ref" in r) spool.ack(r.ref);
      if (n % 20 === 0) await new Promise((resolve) => setTimeout(resolve, 1));
    }
    spool.close();
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(logs.filter((l) => l.level !== "debug" && l.level !== "info")).toEqual([]);
    const again = openSpool({ dir, logger, segmentBytes: 4096 });
    expect(again.recovered.map((r) => r.id)).toEqual(kept);
    again.close();
  });

  it("refuses a directory another live process holds, and takes over a lock left by a dead one", () => {
    const { dir, logger } = setup();
    const spool = openSpool({ dir, logger });
    expect(() => openSpool({ dir, logger })).toThrow(expect.objectContaining({ code: "ConfigInvalid" }));
    spool.close();
    // A lock naming a pid that does not run (or runs with another start time) is stale.
    writeFileSync(join(dir, "spool.lock"), JSON.stringify({ pid: process.pid, start: "1" }));
    const again = openSpool({ dir, logger });
    again.append(record(1));
    again.close();
    expect(readdirSync(dir)).not.toContain("spool.lock");
  });

  it("refuses a record larger than a quarter of the bound", () => {
    const { dir, logger } = setup();
    const spool = openSpool({ dir, logger, maxBytes: 16 * 1024 });
    expect(spool.append(record(1, "x".repeat(8 * 1024)))).toEqual({ refused: "too_large" });
    expect(spool.append(record(2))).toHaveProperty("ref");
    spool.close();
  });
});
