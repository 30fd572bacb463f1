import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { HivePolicy, HiveTrap } from "../../api/index.ts";
import { fileKeyFromStat } from "../kernel/layout.ts";
import { planLayers } from "./layer-plan.ts";
import { buildWatchTable, counterSlots, type LocalContainer, planWatches, trapRefs } from "./watch-plan.ts";
import { tableRecords } from "./watch-table-file.ts";

const policy = (traps: HiveTrap[]): HivePolicy => ({
  apiVersion: "hive-operator.com/v1alpha1",
  kind: "HivePolicy",
  metadata: { name: "p" },
  spec: { traps },
});
const refsOf = (traps: HiveTrap[]) => trapRefs([{ file: "f.yaml", index: 1, policy: policy(traps) }]);

let snapshots: string;
const put = (layer: string, path: string) => {
  const file = join(snapshots, layer, "fs", path);
  mkdirSync(join(file, ".."), { recursive: true });
  writeFileSync(file, "x");
  return fileKeyFromStat(statSync(file));
};
/** The layer finder's contract, over the directory as the snapshotter lays it out (no kernel proof). */
const layers = { find: (path: string) => planLayersFind(path) };
let planLayersFind: (path: string) => ReturnType<typeof fileKeyFromStat>[];

beforeEach(async () => {
  snapshots = mkdtempSync(join(tmpdir(), "hive-layer-plan-"));
  const { findInLayers, layerDirs } = await import("../discover/image-layers.ts");
  planLayersFind = (path) => findInLayers(snapshots, layerDirs(snapshots), path).map((f) => f.key);
});
afterEach(() => rmSync(snapshots, { recursive: true, force: true }));

describe("standalone traps in the image layers", () => {
  it("arms every layer copy of a trap with match, once per file, and none for a host trap", () => {
    const a = put("1", "etc/secret");
    const b = put("2", "etc/secret");
    put("1", "etc/host-only");
    const refs = refsOf([
      { path: "/etc/secret", match: { matchLabels: { app: "a" } } },
      { path: "/etc/secret", accesses: ["write"], match: { "container-name": "db" } },
      { path: "/etc/host-only" },
    ]);
    const { files, misses } = planLayers(refs, layers);
    expect(misses).toEqual([]);
    expect(files.map((f) => f.key.ino).sort()).toEqual([a.ino, b.ino].sort());
    // Both traps with match on each file; the host trap on none.
    expect(files.every((f) => f.refs.length === 2)).toBe(true);
  });

  it("gives a layer file its own group, and a container's file over it (the proof's lower) the same", () => {
    const layerKey = put("1", "etc/secret");
    const [ref] = refsOf([{ path: "/etc/secret", match: { matchLabels: { app: "a" } } }]);
    if (!ref) throw new Error("no trap");
    const c: LocalContainer = { id: "c1", name: "c1", pid: 1, runtimeNamespace: "default", labels: {} };
    const overlay = { major: 0, minor: 77, ino: 5n };
    const plan = {
      ...planWatches([ref], { kernelId: "k", layers, containers: [] }),
      files: [
        {
          ref,
          target: { kind: "container" as const, container: c },
          resolved: {
            key: overlay,
            parent: { major: 0, minor: 77, ino: 4n },
            lower: layerKey,
            resolvedPath: "/etc/secret",
            fileType: "file" as const,
            created: false,
          },
          source: { annotations: {}, labels: {}, nodeName: "n", kernelId: "k" },
        },
      ],
    };
    const table = buildWatchTable(plan as Parameters<typeof buildWatchTable>[0], counterSlots());
    const layerEntry = table.entries.find((e) => e.key.ino === layerKey.ino);
    const overlayEntry = table.entries.find((e) => e.key.ino === overlay.ino);
    expect(layerEntry?.kind).toBe("file");
    expect(layerEntry?.accesses).toContain("read");
    expect(layerEntry?.changes).toBeUndefined();
    expect(layerEntry?.group).toBe(layerEntry?.slot);
    expect(overlayEntry?.group).toBe(layerEntry?.slot);
    // The parent entry of the container's file folds with nothing.
    expect(table.entries.find((e) => e.kind === "parent")?.group).toBeUndefined();
    const record = tableRecords(table).find((r) => r.inode === String(layerKey.ino));
    expect(record?.traps.map((t) => t.target)).toEqual(["image layer"]);
  });

  it("keeps a file watched as a host trap's file, not as a layer's, when both name it", () => {
    const key = put("1", "etc/secret");
    // The host's own path is the layer file itself (a host trap on the snapshotter's files).
    const refs = refsOf([
      { path: "/etc/secret", match: { matchLabels: { app: "a" } } },
      { path: "/etc/secret" },
    ]);
    const plan = planWatches(refs, {
      kernelId: "k",
      layers,
      containers: [],
      hostRoot: join(snapshots, "1/fs"),
    });
    expect(plan.layers?.map((l) => l.key.ino)).toEqual([key.ino]);
    const table = buildWatchTable(plan);
    const onKey = table.entries.filter((e) => e.key.ino === key.ino);
    expect(onKey).toHaveLength(1);
    expect(table.slots.get(onKey[0]?.slot ?? -1)?.kind).toBe("file");
  });

  it("reports a trap whose layers cannot be searched, and arms the others", () => {
    put("1", "etc/secret");
    const refs = refsOf([
      { path: "/etc/secret", match: { matchLabels: { app: "a" } } },
      { path: "/etc/other", match: { matchLabels: { app: "a" } } },
    ]);
    const failing = {
      find: (path: string) => {
        if (path === "/etc/other") throw new Error("EACCES");
        return layers.find(path);
      },
    };
    const { files, misses } = planLayers(refs, failing);
    expect(files).toHaveLength(1);
    expect(misses.map((m) => [m.ref.trap.path, m.error.code])).toEqual([["/etc/other", "InputUnreadable"]]);
  });
});
