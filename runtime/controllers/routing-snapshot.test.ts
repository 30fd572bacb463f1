import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { mountSmallTmpfs, type SmallDisk, tmpfsUnavailable } from "../../test/alerts/tmpfs.ts";
import { createLogger } from "../log.ts";
import { createRoutingSnapshotStore, ROUTING_SNAPSHOT_VERSION } from "./routing-snapshot.ts";

const KERNEL = "11111111-2222-4333-8444-555555555555";
const log = createLogger({}, { level: "error", sink: () => {} });
const policy = (name: string) => ({
  apiVersion: "hive-operator.com/v1alpha1",
  kind: "HivePolicy",
  metadata: { name, namespace: "hive-system" },
  spec: { traps: [{ path: "/etc/shadow" }] },
});

let disk: SmallDisk | undefined;
afterEach(() => {
  disk?.unmount();
  disk = undefined;
});

describe("the routing snapshot", () => {
  // Under CI this never skips: the runner is root (tmpfsUnavailable says why otherwise).
  it.skipIf(tmpfsUnavailable() && process.env.CI !== "true")(
    "is removed when a save fails on a full disk: a restart never routes by a state older than the map",
    async () => {
      disk = mountSmallTmpfs(64);
      const file = join(disk.dir, "hive.routing.json");
      const store = createRoutingSnapshotStore(file, KERNEL, log);
      store.save({ policies: [policy("one") as never], data: [] });
      await store.idle();
      expect(store.load()?.policies.map((p) => p.metadata.name)).toEqual(["one"]);
      // Fill the disk, then save a state with more in it.
      try {
        writeFileSync(join(disk.dir, "filler"), Buffer.alloc(1 << 20));
      } catch {
        // ENOSPC once the disk is full: what this test wants
      }
      store.save({ policies: Array.from({ length: 200 }, (_, i) => policy(`p-${i}`) as never), data: [] });
      await store.idle();
      expect(existsSync(file)).toBe(false);
      expect(store.load()).toBeUndefined();
    },
  );

  it("is not read when another format wrote it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hive-snapshot-"));
    const file = join(dir, "hive.routing.json");
    const store = createRoutingSnapshotStore(file, KERNEL, log);
    store.save({ policies: [policy("one") as never], data: [] });
    await store.idle();
    const saved = JSON.parse(readFileSync(file, "utf8")) as { version: number };
    expect(saved.version).toBe(ROUTING_SNAPSHOT_VERSION);
    writeFileSync(file, JSON.stringify({ ...saved, version: ROUTING_SNAPSHOT_VERSION - 1 }));
    expect(store.load()).toBeUndefined();
    writeFileSync(file, JSON.stringify({ ...saved, version: undefined }));
    expect(store.load()).toBeUndefined();
    rmSync(dir, { recursive: true, force: true });
  });
});
