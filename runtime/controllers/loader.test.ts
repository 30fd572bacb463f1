import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { HiveData } from "../../api/data.ts";
import { trapId } from "../../api/ids.ts";
import { ANNOTATION_RESOLVE_REQUEST, LABEL_KERNEL_ID, LABEL_NODE, LABEL_TRAP_ID } from "../../api/meta.ts";
import type { HivePolicy } from "../../api/policy.ts";
import { RecordingKernel } from "../../test/integration/harness.ts";
import { createLogger } from "../log.ts";
import { ANNOTATION_IMAGE_LAYER, ANNOTATION_PARENT } from "./hive-data.ts";
import { createLoaderController } from "./loader.ts";
import type { DataWriter } from "./ports.ts";
import {
  createRoutingSnapshotStore,
  type RoutingSnapshotStore,
  routingSnapshotFileFor,
} from "./routing-snapshot.ts";

const KERNEL = "eeeeeeee-5555-4555-8555-555555555555";
const policy: HivePolicy = {
  apiVersion: "hive-operator.com/v1alpha1",
  kind: "HivePolicy",
  metadata: { name: "p", namespace: "hive", generation: 1 },
  spec: {
    traps: [
      { path: "/etc/shadow", accesses: ["read"] },
      { path: "/etc/passwd", accesses: ["write"] },
    ],
  },
};
const idOf = (i: number) => trapId({ namespace: "hive", name: "p" }, policy.spec.traps[i] ?? { path: "" });

const NODE = "n1";

function data(
  name: string,
  trap: string,
  ino: number,
  accesses: HiveData["spec"]["accesses"],
  kernel = KERNEL,
  node = NODE,
): HiveData {
  return {
    apiVersion: "hive-operator.com/v1alpha1",
    kind: "HiveData",
    metadata: {
      name,
      namespace: "default",
      labels: { [LABEL_TRAP_ID]: trap, [LABEL_KERNEL_ID]: kernel, [LABEL_NODE]: node },
      annotations: { [ANNOTATION_PARENT]: "8:1:2" },
    },
    spec: { "inode-no": ino, "kernel-id": kernel, device: { major: 8, minor: 1 }, accesses },
  };
}

/** The API side is recorded (a port, not the logic under test). */
function recordingWriter() {
  const removed: string[] = [];
  const annotated: [string, Record<string, string>][] = [];
  const writer: DataWriter = {
    create: async (d) => d,
    replace: async (d) => d,
    remove: async (_ns, name) => {
      removed.push(name);
    },
    annotate: async (_ns, name, a) => {
      annotated.push([name, a]);
    },
  };
  return { writer, removed, annotated };
}

/** A loader over a recording kernel, with the names of the HiveData each access matched. */
function routingLoader(
  kernel = new RecordingKernel(),
  extra: {
    maxHeldEvents?: number;
    snapshot?: RoutingSnapshotStore;
    onAllowed?: Parameters<typeof createLoaderController>[0]["onAllowed"];
  } = {},
) {
  const accesses: string[][] = [];
  const loader = createLoaderController({
    kernelId: KERNEL,
    nodeName: NODE,
    kernel,
    writer: recordingWriter().writer,
    log: createLogger({}, { level: "error" }),
    onAccess: (_e, matched) => accesses.push(matched.map((m) => m.data.metadata.name ?? "")),
    debounceMs: 1,
    ...extra,
  });
  return { kernel, accesses, loader };
}

describe("loader controller", () => {
  it("keeps the kernel map equal to its kernel's HiveData, shares slots, routes events and deletes orphans", async () => {
    const kernel = new RecordingKernel();
    const { writer, removed, annotated } = recordingWriter();
    const accesses: string[][] = [];
    const loader = createLoaderController({
      kernelId: KERNEL,
      nodeName: NODE,
      kernel,
      writer,
      log: createLogger({}, { level: "error" }),
      onAccess: (_e, matched) => accesses.push(matched.map((m) => m.data.metadata.name ?? "")),
      orphanGraceMs: 50,
      debounceMs: 1,
    });
    loader.onPolicy("ADDED", policy);
    loader.onData("ADDED", data("a", idOf(0), 100, ["read"]));
    loader.onData("ADDED", data("b", idOf(1), 100, ["write"])); // same file, another trap
    loader.onData("ADDED", data("c", idOf(0), 200, ["read"]));
    loader.onData(
      "ADDED",
      data("other-kernel", idOf(0), 300, ["read"], "ffffffff-0000-4000-8000-000000000000"),
    );
    loader.onData("ADDED", data("orphan", "0000000000000000000000000000000000000000", 400, ["read"]));
    // Another node's orphan (a kernel shared by two nodes) is that node's to delete, never this one's.
    loader.onData(
      "ADDED",
      data("other-node-orphan", "0000000000000000000000000000000000000000", 500, ["read"], KERNEL, "n2"),
    );
    loader.markSynced();
    await loader.idle();
    const files = kernel.entries.filter((e) => e.kind === "file");
    expect(files.map((e) => Number(e.key.ino)).sort()).toEqual([100, 200]);
    const shared = files.find((e) => e.key.ino === 100n);
    expect([...(shared?.accesses ?? [])].sort()).toEqual(["read", "write"]);
    expect(kernel.entries.filter((e) => e.kind === "parent")).toHaveLength(1);
    // A read on the shared file goes to the trap that wants reads only.
    kernel.emit({ slot: shared?.slot ?? -1, kind: "file", accesses: ["read"] });
    expect(accesses).toEqual([["a"]]);
    // A parent-directory report asks the owning nodes to re-resolve every file in it.
    const parent = kernel.entries.find((e) => e.kind === "parent");
    kernel.emit({ slot: parent?.slot ?? -1, kind: "parent", accesses: ["write"] });
    expect(annotated.map(([n]) => n).sort()).toEqual(["a", "b", "c"]);
    expect(Object.keys(annotated[0]?.[1] ?? {})).toEqual([ANNOTATION_RESOLVE_REQUEST]);
    // The orphan goes after its grace period, never before.
    expect(removed).toEqual([]);
    await new Promise((r) => setTimeout(r, 80));
    await loader.idle();
    expect(removed).toEqual(["orphan"]);
    // Deleting the policy makes all of its HiveData orphans.
    loader.onPolicy("DELETED", policy);
    await new Promise((r) => setTimeout(r, 80));
    await loader.idle();
    expect(removed.sort()).toEqual(["a", "b", "c", "orphan"]);
    loader.stop();
  });

  it("never touches a pinned map before the first HiveData list, and holds the events that came meanwhile", async () => {
    // What a restarted agent finds: the previous agent's map, and accesses it never read.
    const kernel = new RecordingKernel();
    const pinned = {
      key: { major: 8, minor: 1, ino: 100n },
      slot: 7,
      accesses: ["read"] as const,
      kind: "file" as const,
    };
    kernel.entries = [pinned];
    const { accesses, loader } = routingLoader(kernel, { maxHeldEvents: 2 });
    loader.onPolicy("ADDED", policy); // the policy list is in before the HiveData list
    await new Promise((r) => setTimeout(r, 30));
    await loader.idle();
    expect(kernel.syncs).toBe(0);
    expect(kernel.entries).toEqual([pinned]);
    kernel.emit({ slot: 7, kind: "file", key: pinned.key });
    kernel.emit({ slot: 7, kind: "file", key: pinned.key });
    kernel.emit({ slot: 7, kind: "file", key: pinned.key }); // beyond the hold: counted, not silent
    expect(accesses).toEqual([]);
    expect(kernel.holds).toBe(1); // held events stay unconsumed in the kernel meanwhile

    loader.onData("ADDED", data("a", idOf(0), 100, ["read"]));
    loader.markSynced();
    await loader.idle();
    expect(kernel.entries.map((e) => e.key.ino)).toContain(100n);
    expect(accesses).toEqual([["a"], ["a"]]);
    expect(kernel.holds).toBe(0);
    expect(loader.stats()).toMatchObject({ heldEvents: 2, heldEventsDropped: 1, unmatchedEvents: 0 });
    loader.stop();
  });

  it("after a restart, routes from the last sync's snapshot at once, and forgets what the lists no longer hold", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hive-snapshot-"));
    const log = createLogger({}, { level: "error" });
    const file = routingSnapshotFileFor("/sys/fs/bpf/hive", dir);
    try {
      // The previous agent: synced two traps, saved the snapshot, then died.
      const before = routingLoader(new RecordingKernel(), {
        snapshot: createRoutingSnapshotStore(file, KERNEL, log),
      });
      before.loader.onPolicy("ADDED", policy);
      before.loader.onData("ADDED", data("a", idOf(0), 100, ["read"]));
      before.loader.onData("ADDED", data("b", idOf(0), 200, ["read"]));
      before.loader.markSynced();
      await before.loader.idle();
      before.loader.stop();
      const store = createRoutingSnapshotStore(file, KERNEL, log);
      await new Promise((r) => setTimeout(r, 50)); // the background save
      // Another boot's snapshot is never used.
      expect(
        createRoutingSnapshotStore(file, "ffffffff-0000-4000-8000-000000000000", log).load(),
      ).toBeUndefined();

      // An upgrade that replaced the maps (another layout): watched from the snapshot at once.
      const fresh = routingLoader(new RecordingKernel(), { snapshot: store });
      expect(fresh.kernel.entries.filter((e) => e.kind === "file").map((e) => e.key.ino)).toEqual([
        100n,
        200n,
      ]);
      fresh.loader.stop();

      // The restarted agent, with the API server away: no list, yet the first event is routed.
      const kernel = new RecordingKernel();
      kernel.entries = [...before.kernel.entries]; // the map it left pinned
      const { accesses, loader } = routingLoader(kernel, { snapshot: store });
      kernel.emit({ slot: 1, kind: "file", key: { major: 8, minor: 1, ino: 100n } });
      kernel.emit({ slot: 2, kind: "file", key: { major: 8, minor: 1, ino: 200n } });
      expect(accesses).toEqual([["a"], ["b"]]);
      expect(kernel.holds).toBe(0);
      expect(kernel.syncs).toBe(0); // the pinned map is left alone until the lists are in

      // The lists come back without b (deleted during the outage): b routes nothing any more.
      loader.onPolicy("ADDED", policy);
      loader.onData("ADDED", data("a", idOf(0), 100, ["read"]));
      loader.markSynced();
      await loader.idle();
      expect(kernel.entries.filter((e) => e.kind === "file").map((e) => e.key.ino)).toEqual([100n]);
      kernel.emit({ slot: 2, kind: "file", key: { major: 8, minor: 1, ino: 200n } });
      expect(accesses).toEqual([["a"], ["b"]]);
      loader.stop();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("after an upgrade that replaced the maps, writes the snapshot's allow rules with its entries: a denying trap lets its list through from the first write", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hive-snapshot-"));
    const log = createLogger({}, { level: "error" });
    const file = routingSnapshotFileFor("/sys/fs/bpf/hive", dir);
    const denying: HivePolicy = {
      ...policy,
      spec: {
        traps: [
          { path: "/etc/shadow", accesses: ["read"], action: "deny", allow: [{ exe: "/usr/sbin/sshd" }] },
        ],
      },
    };
    const trap = trapId({ namespace: "hive", name: "p" }, denying.spec.traps[0] ?? { path: "" });
    const own = data("own", trap, 100, ["read"]);
    own.spec.executables = [{ path: "/usr/sbin/sshd", "inode-no": "7", device: { major: 0, minor: 50 } }];
    try {
      const before = routingLoader(new RecordingKernel(), {
        snapshot: createRoutingSnapshotStore(file, KERNEL, log),
      });
      before.loader.onPolicy("ADDED", denying);
      before.loader.onData("ADDED", own);
      before.loader.markSynced();
      await before.loader.idle();
      before.loader.stop();
      await new Promise((r) => setTimeout(r, 50)); // the background save
      const fresh = routingLoader(new RecordingKernel(), {
        snapshot: createRoutingSnapshotStore(file, KERNEL, log),
      });
      const entry = fresh.kernel.entries.find((e) => e.kind === "file");
      expect(entry).toMatchObject({ deny: "deny", allow: { parent: false } });
      expect(fresh.kernel.allow.map((r) => [r.slot, r.file.ino, r.exe])).toEqual([[entry?.slot, 7n, 1]]);
      fresh.loader.stop();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("while routing by a snapshot, holds an event for a key the snapshot does not know until the lists are in", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hive-snapshot-"));
    const log = createLogger({}, { level: "error" });
    const store = createRoutingSnapshotStore(routingSnapshotFileFor("/sys/fs/bpf/hive", dir), KERNEL, log);
    try {
      // The previous agent saved a snapshot with trap a, then armed c (its next save failed) and died.
      let saves = 0;
      const firstSaveOnly: RoutingSnapshotStore = {
        ...store,
        save: (snapshot) => {
          if (saves++ === 0) store.save(snapshot);
        },
      };
      const before = routingLoader(new RecordingKernel(), { snapshot: firstSaveOnly });
      before.loader.onPolicy("ADDED", policy);
      before.loader.onData("ADDED", data("a", idOf(0), 100, ["read"]));
      before.loader.markSynced();
      await before.loader.idle();
      await store.idle();
      before.loader.onData("ADDED", data("c", idOf(0), 300, ["read"]));
      await before.loader.idle();
      before.loader.stop();
      const kernel = new RecordingKernel();
      kernel.entries = [...before.kernel.entries];
      const { accesses, loader } = routingLoader(kernel, {
        snapshot: {
          ...store,
          load: () => ({ ...(store.load() ?? { policies: [], data: [], savedAt: "" }) }),
        },
      });
      kernel.emit({ slot: 1, kind: "file", key: { major: 8, minor: 1, ino: 100n } });
      kernel.emit({ slot: 2, kind: "file", key: { major: 8, minor: 1, ino: 300n } });
      expect(accesses).toEqual([["a"]]);
      expect(kernel.holds).toBe(1); // c's read stays in the ring meanwhile
      expect(loader.stats().unmatchedEvents).toBe(0);
      loader.onPolicy("ADDED", policy);
      loader.onData("ADDED", data("a", idOf(0), 100, ["read"]));
      loader.onData("ADDED", data("c", idOf(0), 300, ["read"]));
      loader.markSynced();
      await loader.idle();
      expect(accesses).toEqual([["a"], ["c"]]);
      expect(kernel.holds).toBe(0);
      loader.stop();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("watches and routes an inode number beyond 2^53 exactly", async () => {
    const { kernel, accesses, loader } = routingLoader();
    const ino = (1n << 60n) + 1n; // Number() would round it to 2^60
    const big = data("big", idOf(0), 1, ["read"]);
    big.spec["inode-no"] = ino.toString();
    loader.onPolicy("ADDED", policy);
    loader.onData("ADDED", big);
    loader.markSynced();
    await loader.idle();
    expect(kernel.entries.filter((e) => e.kind === "file").map((e) => e.key.ino)).toEqual([ino]);
    kernel.emit({ slot: 0, kind: "file", key: { major: 8, minor: 1, ino } });
    expect(accesses).toEqual([["big"]]);
    loader.stop();
  });

  it("routes an event by the file's identity, not by a slot number another trap may hold now", async () => {
    const { kernel, accesses, loader } = routingLoader();
    loader.onPolicy("ADDED", policy);
    loader.onData("ADDED", data("a", idOf(0), 100, ["read"]));
    loader.onData("ADDED", data("c", idOf(0), 200, ["read"]));
    loader.markSynced();
    await loader.idle();
    const slotOf = (ino: bigint) => kernel.entries.find((e) => e.key.ino === ino)?.slot ?? -1;
    // Written under an earlier numbering: slot of file 100 today, key of file 200.
    kernel.emit({ slot: slotOf(100n), kind: "file", key: { major: 8, minor: 1, ino: 200n } });
    // A file nobody traps any more: counted, never given to the slot's current owner.
    kernel.emit({ slot: slotOf(100n), kind: "file", key: { major: 8, minor: 1, ino: 999n } });
    expect(accesses).toEqual([["c"]]);
    expect(loader.stats().unmatchedEvents).toBe(1);
    loader.stop();
  });

  it("routes nothing for a trap no live policy holds, even before the next sync drops its file", async () => {
    const { kernel, accesses, loader } = routingLoader();
    loader.onPolicy("ADDED", policy);
    loader.onData("ADDED", data("a", idOf(0), 100, ["read"]));
    loader.markSynced();
    await loader.idle();
    const key = kernel.entries.find((e) => e.kind === "file")?.key;
    // The policy goes; its file is still in the map until the next (debounced) sync.
    loader.onPolicy("DELETED", policy);
    kernel.emit({ slot: 0, kind: "file", key: key ?? { major: 0, minor: 0, ino: 0n } });
    expect(accesses).toEqual([]);
    expect(loader.stats().unmatchedEvents).toBe(1);
    await loader.idle();
    expect(kernel.entries.filter((e) => e.kind === "file")).toEqual([]);
    loader.stop();
  });

  it("watches the accesses of the live trap, not those a HiveData claims", async () => {
    const { kernel, accesses, loader } = routingLoader();
    loader.onPolicy("ADDED", policy);
    // The trap reports reads; a rewritten HiveData claims only `open`.
    loader.onData("ADDED", data("a", idOf(0), 100, ["open"]));
    loader.markSynced();
    await loader.idle();
    const file = kernel.entries.find((e) => e.kind === "file");
    expect(file?.accesses).toEqual(["read"]);
    kernel.emit({ slot: file?.slot ?? -1, kind: "file", key: file?.key ?? { major: 0, minor: 0, ino: 0n } });
    expect(accesses).toEqual([["a"]]);
    loader.stop();
  });

  it("has the kernel deny a denying trap's file in its container, never an image layer's, and a shared file if one trap denies", async () => {
    const denying: HivePolicy = {
      ...policy,
      spec: {
        traps: [
          { path: "/etc/shadow", accesses: ["read"], action: "deny" },
          { path: "/etc/passwd", accesses: ["read"], action: "deny", dryRun: true },
          { path: "/etc/group", accesses: ["read"] },
        ],
      },
    };
    const id = (i: number) => trapId({ namespace: "hive", name: "p" }, denying.spec.traps[i] ?? { path: "" });
    const { kernel, loader } = routingLoader();
    loader.onPolicy("ADDED", denying);
    const layer = data("layer", id(0), 300, ["read"]);
    layer.metadata.annotations = { ...layer.metadata.annotations, [ANNOTATION_IMAGE_LAYER]: "true" };
    for (const d of [
      data("own", id(0), 100, ["read"]),
      data("dry", id(1), 200, ["read"]),
      layer,
      // One file two traps watch: the alerting one's and the denying one's.
      data("shared-alert", id(2), 400, ["read"]),
      data("shared-deny", id(0), 400, ["read"]),
    ])
      loader.onData("ADDED", d);
    loader.markSynced();
    await loader.idle();
    const denyOf = (ino: bigint) => kernel.entries.find((e) => e.kind === "file" && e.key.ino === ino)?.deny;
    expect([denyOf(100n), denyOf(200n), denyOf(300n), denyOf(400n)]).toEqual([
      "deny",
      "dryRun",
      undefined,
      "deny",
    ]);
    loader.stop();
  });

  it("writes a trap's allow rules for its container's own file only (not a layer's, not a shared one), and counts what the kernel allowed under the trap and entry", async () => {
    const allowing: HivePolicy = {
      ...policy,
      spec: {
        traps: [
          {
            path: "/etc/shadow",
            accesses: ["read"],
            allow: [{ exe: "/usr/sbin/sshd" }, { exe: "/usr/lib/*" }, { "parent-exe": "/usr/sbin/cron" }],
          },
          { path: "/etc/group", accesses: ["read"] },
        ],
      },
    };
    const id = (i: number) =>
      trapId({ namespace: "hive", name: "p" }, allowing.spec.traps[i] ?? { path: "" });
    const counted: [string, number, number][] = [];
    const { kernel, loader } = routingLoader(new RecordingKernel(), {
      onAllowed: (armed, entry, count) => counted.push([armed.data.metadata.name ?? "", entry, count]),
    });
    loader.onPolicy("ADDED", allowing);
    const withExecutables = (d: HiveData): HiveData => ({
      ...d,
      spec: {
        ...d.spec,
        executables: [
          { path: "/usr/sbin/sshd", "inode-no": "7", device: { major: 0, minor: 50 } },
          { path: "/usr/sbin/cron", "inode-no": "9", device: { major: 0, minor: 50 } },
        ],
      },
    });
    const layer = withExecutables(data("layer", id(0), 300, ["read"]));
    layer.metadata.annotations = { ...layer.metadata.annotations, [ANNOTATION_IMAGE_LAYER]: "true" };
    for (const d of [
      withExecutables(data("own", id(0), 100, ["read"])),
      layer,
      // One file two traps watch: each judges it by its own list, in user space.
      withExecutables(data("shared-allow", id(0), 400, ["read"])),
      data("shared-plain", id(1), 400, ["read"]),
    ])
      loader.onData("ADDED", d);
    loader.markSynced();
    await loader.idle();
    const own = kernel.entries.find((e) => e.kind === "file" && e.key.ino === 100n);
    expect(own?.allow).toEqual({ parent: true });
    expect(kernel.entries.filter((e) => e.allow !== undefined)).toHaveLength(1);
    const word = (bits: number[]) => bits.reduce((w, b) => w | (1 << b), 0);
    expect(
      kernel.allow.map((r) => ({ slot: r.slot, ino: r.file.ino, exe: r.exe, parent: r.parent })),
    ).toEqual([
      { slot: own?.slot, ino: 7n, exe: word([0]), parent: 0 },
      { slot: own?.slot, ino: 9n, exe: 0, parent: word([2]) },
    ]);
    // The `*` entry is user space's: the kernel decides entries 0 and 2 only.
    expect(kernel.allow[0]?.decided).toBe(word([0, 2]));
    kernel.allowedQueue = [
      { slot: own?.slot ?? -1, file: { major: 0, minor: 50, ino: 7n }, counts: [5n] },
      { slot: own?.slot ?? -1, file: { major: 0, minor: 50, ino: 9n }, counts: [0n, 0n, 2n] },
      // A slot of an earlier numbering, which no trap of this loader owns: not counted.
      { slot: 9999, file: { major: 0, minor: 50, ino: 7n }, counts: [1n] },
    ];
    loader.stop();
    expect(counted).toEqual([
      ["own", 0, 5],
      ["own", 2, 2],
    ]);
  });

  it("alerts a change to the traps that report changes whatever their accesses, and has the owner re-resolve every replacement at once", async () => {
    const changes: HivePolicy = {
      ...policy,
      metadata: { name: "c", namespace: "hive", generation: 1 },
      spec: {
        traps: [
          { path: "/etc/shadow", accesses: ["read"] },
          { path: "/etc/shadow", changes: false },
        ],
      },
    };
    const id = (i: number) => trapId({ namespace: "hive", name: "c" }, changes.spec.traps[i] ?? { path: "" });
    const kernel = new RecordingKernel();
    const { writer, annotated } = recordingWriter();
    const local: string[] = [];
    const accesses: string[][] = [];
    const loader = createLoaderController({
      kernelId: KERNEL,
      nodeName: NODE,
      kernel,
      writer,
      log: createLogger({}, { level: "error" }),
      onAccess: (_e, matched) => accesses.push(matched.map((m) => m.data.metadata.name ?? "")),
      resolveLocally: (d) =>
        d.metadata.labels?.[LABEL_NODE] === NODE && local.push(d.metadata.name ?? "") > 0,
      debounceMs: 1,
    });
    loader.onPolicy("ADDED", changes);
    loader.onData("ADDED", data("a", id(0), 100, ["read"]));
    loader.onData("ADDED", data("b", id(1), 100, ["read"]));
    loader.onData("ADDED", data("c", id(0), 100, ["read"], KERNEL, "n2")); // a node sharing this kernel
    loader.markSynced();
    await loader.idle();
    const file = kernel.entries.find((e) => e.kind === "file");
    expect(file?.changes).toBe(true);
    const slot = file?.slot ?? -1;
    // Two replacements in a row: both reach the owners, none is dropped.
    kernel.emit({ slot, kind: "file", accesses: [], mask: 0, change: "replaced" });
    kernel.emit({ slot, kind: "file", accesses: [], mask: 0, change: "replaced" });
    expect(accesses).toEqual([
      ["a", "c"],
      ["a", "c"],
    ]);
    expect(local).toEqual(["a", "b", "a", "b"]);
    await new Promise((r) => setTimeout(r, 10));
    expect(annotated.map(([n]) => n)).toEqual(["c", "c"]);
    // A truncation keeps the inode: alerted, nothing to re-resolve.
    kernel.emit({ slot, kind: "file", accesses: [], mask: 0, change: "truncated" });
    expect(accesses.at(-1)).toEqual(["a", "c"]);
    expect(local).toHaveLength(4);
    // The file the kernel armed itself (renamed over the trapped one) is routed by the slot it copied...
    const followedKey = { major: 8, minor: 1, ino: 999n };
    kernel.emit({ slot, kind: "file", followed: true, key: followedKey, ktimeNs: process.hrtime.bigint() });
    expect(accesses.at(-1)).toEqual(["a", "b", "c"]);
    // ...but never a slot numbered before this loader's first sync (a previous agent's).
    const before = accesses.length;
    kernel.emit({ slot, kind: "file", followed: true, key: followedKey, ktimeNs: 1n });
    expect(accesses).toHaveLength(before);
    loader.stop();
  });
});
