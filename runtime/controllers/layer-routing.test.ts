import type { V1Pod } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import type { HiveData } from "../../api/data.ts";
import { trapId } from "../../api/ids.ts";
import { LABEL_TRAP_ID } from "../../api/meta.ts";
import type { HivePolicy } from "../../api/policy.ts";
import { loaderWith } from "../../test/fixtures/layer-loader.ts";
import { attributeWith } from "../agent/node-agent-context.ts";
import type { OriginOf } from "../discover/cgroup-containers.ts";
import type { KernelEvent } from "../kernel/contract.ts";
import { createLogger } from "../log.ts";
import type { DiscoverController } from "./discover.ts";
import { buildHiveData, buildLayerData } from "./hive-data.ts";
import { KubeletPodUids } from "./kubelet-pod-uids.ts";
import { type AccessOrigin, type AttributeAccess, quietKey } from "./layer-routing.ts";

const KERNEL = "eeeeeeee-5555-4555-8555-555555555555";
const NODE = "n1";
const PLATFORM = "hive-system";
const LAYER = { major: 8, minor: 1, ino: 500n };
const OVERLAY = { major: 0, minor: 77, ino: 500n };

const policy = (
  namespace: string,
  name: string,
  matchLabels: Record<string, string>,
  containerName?: string,
): HivePolicy => ({
  apiVersion: "hive-operator.com/v1alpha1",
  kind: "HivePolicy",
  metadata: { name, namespace, generation: 1 },
  spec: {
    traps: [
      {
        path: "/etc/secret",
        match: { matchLabels, ...(containerName ? { "container-name": containerName } : {}) },
      },
    ],
  },
});
const platform = policy(PLATFORM, "reader", { app: "reader" }, "^main$");
const tenant = policy("team-b", "tenant", { app: "reader" });
const idOf = (p: HivePolicy) =>
  trapId(
    { namespace: p.metadata.namespace ?? "", name: p.metadata.name ?? "" },
    p.spec.traps[0] ?? { path: "" },
  );

const layerData = (p: HivePolicy): HiveData =>
  buildLayerData({
    policy: p,
    trap: p.spec.traps[0] ?? { path: "" },
    trapId: idOf(p),
    kernelId: KERNEL,
    nodeName: NODE,
    namespace: PLATFORM,
    file: LAYER,
  });

const pod = (
  name: string,
  namespace: string,
  labels: Record<string, string>,
  statusIds: Record<string, string> = {},
): V1Pod => ({
  metadata: { name, namespace, uid: `uid-${name}`, labels },
  spec: {
    nodeName: NODE,
    containers: [{ name: "main" }, { name: "sidecar" }],
    initContainers: [{ name: "init" }],
  },
  status: {
    phase: "Pending",
    containerStatuses: Object.entries(statusIds).map(([n, id]) => ({
      name: n,
      containerID: `containerd://${id}`,
      image: "x",
      imageID: "x",
      ready: false,
      restartCount: 0,
    })),
  },
});

const origin = (p: V1Pod, containerId: string, containerName?: string): AccessOrigin => ({
  pod: p,
  containerId,
  scheme: "containerd",
  containerName,
});

describe("accesses to an image layer's file", () => {
  it("alert for the container the cgroup names, by the traps that apply to it, and no other", async () => {
    const selected = pod("web-1", "team-a", { app: "reader" });
    const otherTeam = pod("web-2", "team-b", { app: "reader" });
    const unlabelled = pod("db-1", "team-a", { app: "db" });
    let next: AccessOrigin | null | undefined;
    const { kernel, loader, routed, dropped } = loaderWith(KERNEL, () => next);
    for (const p of [platform, tenant]) {
      loader.onPolicy("ADDED", p);
      loader.onData("ADDED", layerData(p));
    }
    loader.markSynced();
    await loader.idle();
    const entry = kernel.entries.find((e) => e.key.ino === LAYER.ino);
    expect(entry?.group).toBe(entry?.slot); // its own group: the overlay inodes over it fold into it
    const emit = (o: AccessOrigin | null | undefined) => {
      next = o;
      kernel.emit({ slot: entry?.slot ?? -1, kind: "file", key: LAYER, cgroupId: 42n });
    };

    // Named by the runtime before the pod's status names it: the platform trap (main only) applies.
    emit(origin(selected, "a".repeat(64), "main"));
    expect(routed.at(-1)?.map((d) => d.metadata.annotations?.container_id)).toEqual([
      `containerd://${"a".repeat(64)}`,
    ]);
    expect(routed.at(-1)?.[0]?.metadata.annotations?.pod_name).toBe("web-1");
    expect(routed.at(-1)?.[0]?.metadata.annotations?.container_name).toBe("main");
    // The sidecar of the same pod: no trap of this namespace's reach selects it.
    emit(origin(selected, "b".repeat(64), "sidecar"));
    // The pod's status names the container when the runtime does not.
    emit(origin(pod("web-1", "team-a", { app: "reader" }, { init: "c".repeat(64) }), "c".repeat(64)));
    // Another namespace's pod: only its own namespace's tenant trap and the platform's (not main) apply.
    emit(origin(otherTeam, "d".repeat(64), "sidecar"));
    expect(routed.at(-1)?.map((d) => d.metadata.labels?.[LABEL_TRAP_ID])).toEqual([idOf(tenant)]);
    // A pod no trap selects, the host, and a container this node cannot name.
    emit(origin(unlabelled, "e".repeat(64), "main"));
    emit(null);
    emit(undefined);
    emit(origin(selected, "f".repeat(64))); // neither the status nor the runtime names it (yet)
    expect(routed).toHaveLength(2);
    expect(dropped).toEqual(["unselected", "unselected", "unselected", "unselected", "unattributed"]);
    // It waits, holding its ring space; a loader stopped before the status names it leaves it in
    // the kernel's ring for the next agent: not counted lost (loader-layer-hold.test.ts).
    const holds = kernel.holds;
    expect(holds).toBeGreaterThan(0);
    loader.stop();
    expect(dropped).toHaveLength(5);
    expect(kernel.holds).toBe(holds);
  });

  it("routes a one-shot container's access once the pod is listed and its status names the container", async () => {
    const selected = pod("job-1", "team-a", { app: "reader" });
    // The pod list is not in yet (a restart during an API outage): the access waits.
    let next: ReturnType<AttributeAccess> = "pod-unknown";
    const { kernel, loader, routed, dropped } = loaderWith(KERNEL, () => next);
    loader.onPolicy("ADDED", platform);
    loader.onData("ADDED", layerData(platform));
    loader.markSynced();
    await loader.idle();
    const entry = kernel.entries.find((e) => e.key.ino === LAYER.ino);
    kernel.emit({ slot: entry?.slot ?? -1, kind: "file", key: LAYER, cgroupId: 42n });
    expect(routed).toHaveLength(0);
    // Listed, but its status does not name the exited container yet: it waits on.
    next = origin(selected, "f".repeat(64));
    await new Promise((r) => setTimeout(r, 700));
    expect(routed).toHaveLength(0);
    // The kubelet reports the exited container: its status names it "main".
    next = origin(pod("job-1", "team-a", { app: "reader" }, { main: "f".repeat(64) }), "f".repeat(64));
    await new Promise((r) => setTimeout(r, 700));
    expect(routed.map((r) => r.map((d) => d.metadata.annotations?.container_name))).toEqual([["main"]]);
    expect(dropped).toEqual([]);
    loader.stop();
  });

  it("alerts a tenant who relabels its pod right after the access: the pod as it was at the access", async () => {
    // The attacker: read the trapped file, then at once drop the label the trap selects on, so that
    // when the access is routed (it waited in the ring) no trap selects the pod any more.
    let now = 1_000n;
    const uids = new KubeletPodUids(NODE, createLogger({}, { level: "error" }), () => now);
    const before = pod("web-1", "team-a", { app: "reader" }, { main: "a".repeat(64) });
    uids.onPod("ADDED", before);
    const originOf: OriginOf = () => ({
      podUid: "uid-web-1",
      containerId: "a".repeat(64),
      scheme: "containerd",
    });
    const attribute = attributeWith(originOf, {
      podByUid: (uid, atNs) => uids.podByUid(uid, atNs),
    } as DiscoverController);
    const { kernel, loader, routed, dropped } = loaderWith(KERNEL, attribute);
    loader.onPolicy("ADDED", platform);
    loader.onData("ADDED", layerData(platform));
    loader.markSynced();
    await loader.idle();
    const slot = kernel.entries.find((e) => e.key.ino === LAYER.ino)?.slot ?? -1;
    // The access at 1,500 ns; the relabelling seen at 2,000 ns, before the access is routed.
    now = 2_000n;
    uids.onPod("MODIFIED", { ...before, metadata: { ...before.metadata, labels: { app: "other" } } });
    kernel.emit({ slot, kind: "file", key: LAYER, cgroupId: 42n, ktimeNs: 1_500n });
    expect(routed.map((r) => r.map((d) => d.metadata.annotations?.pod_name))).toEqual([["web-1"]]);
    // An access after the change is the relabelled pod's: no trap selects it.
    kernel.emit({ slot, kind: "file", key: LAYER, cgroupId: 42n, ktimeNs: 2_500n });
    expect(dropped).toEqual(["unselected"]);
    // The earlier labels are kept for a minute after the change, no longer.
    now = 2_000n + 61_000_000_000n;
    uids.onPod("MODIFIED", { ...before, metadata: { ...before.metadata, labels: { app: "other", v: "2" } } });
    kernel.emit({ slot, kind: "file", key: LAYER, cgroupId: 42n, ktimeNs: 1_500n });
    expect(dropped).toEqual(["unselected", "unselected"]);
    loader.stop();
  });

  it("folds a container's overlay inode into the layer's group, and only when the layer is armed", async () => {
    const { kernel, loader } = loaderWith(KERNEL, () => undefined);
    const running = pod("web-1", PLATFORM, { app: "reader" }, { main: "a".repeat(64) });
    const containerData = (imageFile: typeof LAYER | undefined) =>
      buildHiveData({
        policy: platform,
        trap: platform.spec.traps[0] ?? { path: "" },
        trapId: idOf(platform),
        pod: running,
        container: { name: "main", containerId: `containerd://${"a".repeat(64)}` },
        kernelId: KERNEL,
        nodeName: NODE,
        namespace: PLATFORM,
        file: OVERLAY,
        parent: { major: 0, minor: 77, ino: 2n },
        imageFile,
      });
    loader.onPolicy("ADDED", platform);
    loader.onData("ADDED", containerData(LAYER));
    loader.markSynced();
    await loader.idle();
    // The layer is not armed (no layer HiveData): nothing to fold with.
    expect(kernel.entries.find((e) => e.key.minor === 77 && e.kind === "file")?.group ?? 0).toBe(0);
    loader.onData("ADDED", layerData(platform));
    await new Promise((r) => setTimeout(r, 10));
    await loader.idle();
    const layer = kernel.entries.find((e) => e.key.ino === LAYER.ino && e.key.major === 8);
    const overlay = kernel.entries.find((e) => e.key.minor === 77 && e.kind === "file");
    expect(layer?.group).toBeGreaterThan(0);
    expect(overlay?.group).toBe(layer?.group);
    expect(overlay?.slot).not.toBe(layer?.slot);
    loader.stop();
  });
});

describe("the quiet-map key of an access to an image layer's file", () => {
  const layerEntry = { key: LAYER, slot: 4, group: 4, accesses: ["read"], kind: "file" } as const;
  const access: KernelEvent = {
    ktimeNs: 1n,
    key: LAYER,
    mask: 0x24,
    accesses: ["read", "open"],
    kind: "file",
    slot: 4,
    group: 4,
    pid: 1,
    tgid: 1,
    uid: 0,
    gid: 0,
    comm: "cat",
    cgroupId: 42n,
    count: 1,
    process: { exe: { source: "unknown" }, execNs: 0n },
  };
  const unselected = { dropped: "unselected" } as const;

  it("is the access's cgroup and the layer's group, for an access no trap selects", () => {
    expect(quietKey(access, unselected, layerEntry)).toEqual({ cgroupId: 42n, group: 4 });
  });

  it("is none for an access not yet attributable, or one that alerts", () => {
    expect(quietKey(access, { dropped: "unattributed" }, layerEntry)).toBeUndefined();
    expect(quietKey(access, { matched: [] }, layerEntry)).toBeUndefined();
  });

  it("is none for a change of the file: re-resolution needs every one", () => {
    expect(quietKey({ ...access, change: "deleted" }, unselected, layerEntry)).toBeUndefined();
  });

  it("is none unless the event and the last sync both name the layer's own entry with that group", () => {
    // Before any sync (the kernel map may be an earlier agent's), or the key gone since.
    expect(quietKey(access, unselected, undefined)).toBeUndefined();
    // The group renumbered since the event was raised: 4 may now be another layer's.
    expect(quietKey(access, unselected, { ...layerEntry, slot: 9, group: 9 })).toBeUndefined();
    // An overlay entry folded into the layer's group (its own slot): not the entry every container reaches.
    expect(quietKey({ ...access, slot: 7 }, unselected, { ...layerEntry, slot: 7 })).toBeUndefined();
    // No group, a parent entry, a file the kernel armed itself.
    expect(quietKey({ ...access, group: undefined }, unselected, layerEntry)).toBeUndefined();
    expect(quietKey({ ...access, kind: "parent" }, unselected, layerEntry)).toBeUndefined();
    expect(quietKey({ ...access, followed: true }, unselected, layerEntry)).toBeUndefined();
  });
});
