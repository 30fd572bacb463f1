import { mkdirSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { HiveTrap } from "../../api/index.ts";
import { captureLogger } from "../../test/alerts/fixtures.ts";
import type { AlertSource } from "../alerts/alert-source.ts";
import type { KernelEvent } from "../kernel/contract.ts";
import { cgroupDirOf, containerOfPath, createContainerAttribution } from "./container-cgroups.ts";
import { createLayerAlerts } from "./layer-alerts.ts";
import { type ContainerRecord, trapRefs } from "./watch-plan.ts";

const record = (
  id: string,
  cgroupsPath: string | undefined,
  labels: Record<string, string> = {},
): ContainerRecord => ({
  id,
  name: id,
  runtimeNamespace: "default",
  labels,
  ...(cgroupsPath === undefined ? {} : { cgroupsPath }),
});

/** The trap references of one policy file holding `traps`. */
const refsOf = (traps: HiveTrap[]) =>
  trapRefs([
    {
      file: "f.yaml",
      index: 1,
      policy: {
        apiVersion: "hive-operator.com/v1alpha1",
        kind: "HivePolicy",
        metadata: { name: "p" },
        spec: { traps },
      },
    },
  ]);

describe("a runtime spec's cgroupsPath", () => {
  it("is the cgroupfs driver's path as it is, and the systemd driver's slices and scope", () => {
    expect(cgroupDirOf("/default/web")).toBe("/default/web");
    expect(cgroupDirOf("/kubepods/besteffort/pod1/abc")).toBe("/kubepods/besteffort/pod1/abc");
    expect(cgroupDirOf("kubepods-besteffort-pod1.slice:cri-containerd:abc")).toBe(
      "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice/cri-containerd-abc.scope",
    );
    expect(cgroupDirOf(":nerdctl:abc")).toBe("/system.slice/nerdctl-abc.scope");
    // A climb out of the cgroup root is no path of it.
    expect(cgroupDirOf("/default/../../etc")).toBe("/default/etc");
  });

  it("names the container whose cgroup holds the access's, never one a name below it claims", () => {
    const a = record("a", "/default/a");
    const b = record("b", "/default/b");
    expect(containerOfPath("/default/a", [a, b])).toBe(a);
    // A process of a makes cgroups of its own below a's, named after b: still a's.
    expect(containerOfPath("/default/a/default/b", [a, b])).toBe(a);
    expect(containerOfPath("/default/a/b", [a, b])).toBe(a);
    // A sibling whose name begins like a's is not a's.
    expect(containerOfPath("/default/ab", [a, b])).toBeUndefined();
    expect(containerOfPath("/system.slice/sshd.service", [a, b])).toBeUndefined();
    // A container in the root cgroup, or without a spec path, names nobody.
    expect(containerOfPath("/default/a", [record("root", "/"), record("none", undefined)])).toBeUndefined();
  });
});

describe("attribution by cgroup id", () => {
  let root: string;
  const dir = (path: string) => {
    mkdirSync(join(root, path), { recursive: true });
    return statSync(join(root, path), { bigint: true }).ino;
  };
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), "hive-cgroups-"));
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it("lists the runtime again only for an access newer than its last list, and once for a burst", async () => {
    let records = [record("a", "/default/a")];
    let lists = 0;
    const attribution = createContainerAttribution({
      cgroupRoot: root,
      records: async () => {
        lists += 1;
        return records;
      },
    });
    const a = dir("default/a");
    const host = dir("system.slice/sshd.service");
    expect(await attribution.containerOf(a, process.hrtime.bigint())).toMatchObject({ id: "a" });
    expect(await attribution.containerOf(host, process.hrtime.bigint())).toBeNull();
    const listsBefore = lists;
    // Not newer than the last list: answered from it.
    const old = process.hrtime.bigint() - 10_000_000_000n;
    expect(await attribution.containerOf(host, old)).toBeNull();
    expect(lists).toBe(listsBefore);
    // A container created since: found by one more list, shared by a burst of its accesses.
    records = [...records, record("b", "/default/b")];
    const b = dir("default/b");
    const at = process.hrtime.bigint();
    const found = await Promise.all([1, 2, 3].map(() => attribution.containerOf(b, at)));
    expect(found.map((c) => c?.id)).toEqual(["b", "b", "b"]);
    expect(lists).toBe(listsBefore + 1);
    // A cgroup that is gone names nobody the node can tell.
    expect(await attribution.containerOf(123456789n, process.hrtime.bigint())).toBeUndefined();
  });

  it("forgets the containers it listed when told they changed (one deleted may return with other labels)", async () => {
    let labels = { app: "other" };
    const attribution = createContainerAttribution({
      cgroupRoot: root,
      records: async () => [record("a", "/default/a", labels)],
    });
    const a = dir("default/a");
    expect((await attribution.containerOf(a, process.hrtime.bigint()))?.labels).toEqual({ app: "other" });
    labels = { app: "reader" };
    attribution.invalidate();
    // An access from before the change is still answered by a list made after it.
    expect((await attribution.containerOf(a, 0n))?.labels).toEqual({ app: "reader" });
  });

  it("alerts the traps that select the access's container, and drops (counted) what none selects", async () => {
    const reader = dir("default/reader");
    const other = dir("default/other");
    const attribution = createContainerAttribution({
      cgroupRoot: root,
      records: async () => [
        { ...record("reader", "/default/reader", { app: "reader" }), pid: 4242 },
        record("other", "/default/other", { app: "other" }),
      ],
    });
    const traps: HiveTrap[] = [
      { path: "/etc/secret", accesses: ["read"], match: { matchLabels: { app: "reader" } } },
      { path: "/etc/secret", accesses: ["write"], match: { matchLabels: { app: "reader" } } },
    ];
    const refs = refsOf(traps);
    const alerted: { trap: string; container: string | undefined }[] = [];
    const dropped: string[] = [];
    const layerAlerts = createLayerAlerts({
      attribution,
      watcher: {},
      sourceOf: (ref, target) =>
        ({
          annotations: { container_id: target.kind === "container" ? target.container.id : "host" },
          labels: { trap: ref.trapId },
        }) as unknown as AlertSource,
      alert: (_event, source) =>
        alerted.push({ trap: String(source.labels.trap), container: source.annotations.container_id }),
      onDropped: (reason) => dropped.push(reason),
      logger: captureLogger().logger,
    });
    const event = (cgroupId: bigint) =>
      ({
        cgroupId,
        ktimeNs: process.hrtime.bigint(),
        slot: 7,
        accesses: ["read"],
        kind: "file",
      }) as KernelEvent;
    layerAlerts.handle(event(reader), refs);
    layerAlerts.handle(event(other), refs);
    layerAlerts.handle(event(dir("system.slice/cron.service")), refs);
    layerAlerts.handle(event(987654321n), refs);
    await layerAlerts.idle();
    // The read alerts the read trap only; the write trap selects the container but wants no read.
    expect(alerted).toEqual([{ trap: refs[0]?.trapId, container: "reader" }]);
    expect(dropped.sort()).toEqual(["unattributed", "unselected", "unselected"]);
  });

  it("quiets in the kernel a container no trap selects, unless the containers changed while it was looked up", async () => {
    const other = dir("default/other");
    let release: () => void = () => undefined;
    let gate: Promise<void> | undefined;
    const attribution = createContainerAttribution({
      cgroupRoot: root,
      records: async () => {
        await gate;
        return [record("other", "/default/other", { app: "other" })];
      },
    });
    const quieted: string[] = [];
    const [ref] = refsOf([{ path: "/etc/secret", match: { matchLabels: { app: "reader" } } }]);
    const layerAlerts = createLayerAlerts({
      attribution,
      watcher: { quiet: (cgroupId, group) => quieted.push(`${cgroupId}/${group}`) },
      sourceOf: () => {
        throw new Error("nothing selects it");
      },
      alert: () => undefined,
      logger: captureLogger().logger,
    });
    const event = {
      cgroupId: other,
      ktimeNs: process.hrtime.bigint(),
      slot: 9,
      accesses: ["read"],
      kind: "file",
    };
    layerAlerts.handle(event as KernelEvent, ref ? [ref] : []);
    await layerAlerts.idle();
    expect(quieted).toEqual([`${other}/9`]);
    // Relabelled while its access was being looked up: it may be selected now, so it is not quieted.
    gate = new Promise((r) => {
      release = r;
    });
    attribution.invalidate();
    layerAlerts.handle({ ...event, ktimeNs: process.hrtime.bigint() } as KernelEvent, ref ? [ref] : []);
    await new Promise((r) => setTimeout(r, 10));
    attribution.invalidate();
    release();
    await layerAlerts.idle();
    expect(quieted).toHaveLength(1);
  });
});
