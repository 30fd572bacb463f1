import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  CgroupIndex,
  containerNameFromBundle,
  createOriginOf,
  isCgroupV2Root,
  parseKubeletCgroup,
} from "./cgroup-containers.ts";

const UID = "0b7c2f7e-3d5c-4a8e-9d43-6a0e7d1f2c3b";
const ID = "ab".repeat(32);
const OTHER = "cd".repeat(32);

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "hive-cgroups-"));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe("a container by its cgroup", () => {
  it("reads the kubelet's pod and container levels (cgroupfs and systemd drivers)", () => {
    expect(parseKubeletCgroup(`/kubepods/besteffort/pod${UID}/${ID}`)).toEqual({
      podUid: UID,
      containerId: ID,
      scheme: "containerd",
    });
    expect(parseKubeletCgroup(`/kubepods/pod${UID}/${ID}`)?.containerId).toBe(ID);
    const systemd = `/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod${UID.replaceAll("-", "_")}.slice/cri-containerd-${ID}.scope`;
    expect(parseKubeletCgroup(systemd)).toEqual({ podUid: UID, containerId: ID, scheme: "containerd" });
    expect(
      parseKubeletCgroup(`/kubepods.slice/kubepods-pod${UID.replaceAll("-", "_")}.slice/crio-${ID}.scope`)
        ?.scheme,
    ).toBe("cri-o");
  });

  it("is decided by the kubelet's levels only: cgroups a container makes below its own name nobody else", () => {
    // A process that can write its cgroup makes one named after another container and moves into it.
    expect(parseKubeletCgroup(`/kubepods/besteffort/pod${UID}/${ID}/${OTHER}`)?.containerId).toBe(ID);
    expect(parseKubeletCgroup(`/kubepods/besteffort/pod${UID}/${ID}/pod${UID}/${OTHER}`)?.containerId).toBe(
      ID,
    );
    // The pod level alone (the sandbox's cgroup parent), the host, a system service: no container.
    expect(parseKubeletCgroup(`/kubepods/besteffort/pod${UID}`)).toBeUndefined();
    expect(parseKubeletCgroup("/system.slice/containerd.service")).toBeUndefined();
    expect(parseKubeletCgroup("/")).toBeUndefined();
  });

  it("finds a cgroup by id (its directory's inode), walking again only for a cgroup newer than the last walk", () => {
    const index = new CgroupIndex(dir);
    mkdirSync(join(dir, "kubepods/besteffort/pod1/c1"), { recursive: true });
    const before = process.hrtime.bigint();
    const c1 = statSync(join(dir, "kubepods/besteffort/pod1/c1"), { bigint: true }).ino;
    expect(index.path(c1, before)).toBe("/kubepods/besteffort/pod1/c1");
    expect(index.walks).toBe(1);
    // Unknown ids of accesses from before the last walk cost nothing more.
    expect(index.path(123456789n, before)).toBeUndefined();
    expect(index.walks).toBe(1);
    mkdirSync(join(dir, "kubepods/besteffort/pod1/c2"));
    const c2 = statSync(join(dir, "kubepods/besteffort/pod1/c2"), { bigint: true }).ino;
    expect(index.path(c2, process.hrtime.bigint())).toBe("/kubepods/besteffort/pod1/c2");
    expect(index.walks).toBe(2);
  });

  it("names a container from its task bundle, unless the bundle is another pod's", () => {
    const bundle = (id: string, annotations: Record<string, string>) => {
      mkdirSync(join(dir, "io.containerd.runtime.v2.task/k8s.io", id), { recursive: true });
      writeFileSync(
        join(dir, "io.containerd.runtime.v2.task/k8s.io", id, "config.json"),
        JSON.stringify({ annotations }),
      );
    };
    bundle(ID, { "io.kubernetes.cri.container-name": "main", "io.kubernetes.cri.sandbox-uid": UID });
    bundle(OTHER, {
      "io.kubernetes.cri.container-name": "main",
      "io.kubernetes.cri.sandbox-uid": "another-pod",
    });
    const c = { podUid: UID, scheme: "containerd" };
    expect(containerNameFromBundle(dir, ["moby", "k8s.io"], { ...c, containerId: ID })).toBe("main");
    expect(containerNameFromBundle(dir, ["k8s.io"], { ...c, containerId: OTHER })).toBeUndefined();
    expect(containerNameFromBundle(dir, ["k8s.io"], { ...c, containerId: "ef".repeat(32) })).toBeUndefined();
  });

  it("knows a cgroup v2 root from a v1 hierarchy, where ids name no directory", () => {
    mkdirSync(join(dir, "v1/cpu"), { recursive: true });
    mkdirSync(join(dir, "v2"));
    writeFileSync(join(dir, "v2/cgroup.controllers"), "cpu memory pids\n");
    expect(isCgroupV2Root(join(dir, "v2"))).toBe(true);
    expect(isCgroupV2Root(join(dir, "v1"))).toBe(false);
  });

  it("tells a pod's container from the host and from a cgroup that is gone", () => {
    const cgroups = join(dir, "cgroup");
    mkdirSync(join(cgroups, `kubepods/pod${UID}/${ID}`), { recursive: true });
    mkdirSync(join(cgroups, "system.slice"), { recursive: true });
    const originOf = createOriginOf({
      cgroupRoot: cgroups,
      runtimeStateDir: join(dir, "state"),
      namespaces: ["k8s.io"],
    });
    const now = process.hrtime.bigint();
    const ino = (p: string) => statSync(join(cgroups, p), { bigint: true }).ino;
    expect(originOf(ino(`kubepods/pod${UID}/${ID}`), now)).toEqual({
      podUid: UID,
      containerId: ID,
      scheme: "containerd",
    });
    expect(originOf(ino("system.slice"), now)).toBeNull();
    expect(originOf(1n, now)).toBeUndefined();
  });

  it("names a one-shot container gone before the walk by its cgroup's names, only at the kubelet's container depth", () => {
    const cgroups = join(dir, "cgroup");
    // A live container at depth 4 (besteffort) teaches the depth; the gone one's id is unknown.
    mkdirSync(join(cgroups, `kubepods/besteffort/pod${UID}/${ID}`), { recursive: true });
    const originOf = createOriginOf({
      cgroupRoot: cgroups,
      runtimeStateDir: join(dir, "state"),
      namespaces: ["k8s.io"],
    });
    const now = process.hrtime.bigint();
    const victim = "0f0e0d0c-0b0a-4909-8807-060504030201";
    expect(originOf(2n, now, { name: OTHER, parent: `pod${victim}`, level: 4 })).toEqual({
      podUid: victim,
      containerId: OTHER,
      scheme: "containerd",
    });
    // A process that made cgroups below its own container's, named after another pod, and
    // removed them before the walk: deeper than any container, it names nobody.
    expect(originOf(3n, now, { name: OTHER, parent: `pod${victim}`, level: 6 })).toBeUndefined();
    // Names that are no kubelet container's, or that would climb: nobody's, or unknown.
    expect(originOf(4n, now, { name: "init.scope", parent: "system.slice", level: 4 })).toBeNull();
    expect(originOf(5n, now, { name: `../${OTHER}`, parent: `pod${victim}`, level: 4 })).toBeUndefined();
  });
});
