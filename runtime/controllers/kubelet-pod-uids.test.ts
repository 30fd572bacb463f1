import type { V1Pod } from "@kubernetes/client-node";
import { afterEach, describe, expect, it, vi } from "vitest";
import { parseKubeletCgroup } from "../discover/cgroup-containers.ts";
import { createLogger } from "../log.ts";
import { KubeletPodUids, MIRROR_ANNOTATION } from "./kubelet-pod-uids.ts";

/** The kubelet's uid of a static pod: the hash of its manifest, as its cgroups and mirror pod carry it. */
const STATIC = "6b1c3ae7f4d0a8f5b2c1e9d3a7f6b4c2";
const ID = "ab".repeat(32);

const pod = (name: string, uid: string, extra: Partial<NonNullable<V1Pod["metadata"]>> = {}): V1Pod => ({
  metadata: { name, namespace: "kube-system", uid, ...extra },
  spec: { nodeName: "node-1", containers: [{ name: "c", image: "i" }] },
});
/** The mirror pod the kubelet writes for its static pod: the annotation, and the Node as owner. */
const mirror = (name: string, uid: string, hash = STATIC) =>
  pod(name, uid, {
    annotations: { [MIRROR_ANNOTATION]: hash },
    ownerReferences: [{ apiVersion: "v1", kind: "Node", name: "node-1", uid: "n1", controller: true }],
  });
const uids = () => new KubeletPodUids("node-1", createLogger({}, { level: "error", sink: () => {} }));

afterEach(() => vi.restoreAllMocks());

describe("a static pod's accesses, by the uid its cgroups carry", () => {
  it("reads the static pod's 32-hex uid from its cgroup (cgroupfs and systemd drivers)", () => {
    expect(parseKubeletCgroup(`/kubepods/burstable/pod${STATIC}/${ID}`)?.podUid).toBe(STATIC);
    expect(
      parseKubeletCgroup(
        `/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod${STATIC}.slice/cri-containerd-${ID}.scope`,
      )?.podUid,
    ).toBe(STATIC);
    // Neither shorter nor longer hex is a pod level.
    expect(parseKubeletCgroup(`/kubepods/pod${STATIC.slice(1)}/${ID}`)).toBeUndefined();
  });

  it("names the mirror pod by the static pod's uid, and a pod of the API server by its own", () => {
    const u = uids();
    u.onPod("ADDED", mirror("etcd-node-1", "0b7c2f7e-3d5c-4a8e-9d43-6a0e7d1f2c3b"));
    u.onPod("ADDED", pod("web", "11111111-2222-4333-8444-555555555555"));
    expect(u.podByUid(STATIC)?.metadata?.name).toBe("etcd-node-1");
    expect(u.podByUid("0b7c2f7e-3d5c-4a8e-9d43-6a0e7d1f2c3b")).toBeUndefined();
    expect(u.podByUid("11111111-2222-4333-8444-555555555555")?.metadata?.name).toBe("web");
  });

  it("names nobody when a tenant's pod copies the static pod's hash, until that pod is gone a minute", () => {
    const u = uids();
    u.onPod("ADDED", mirror("etcd-node-1", "0b7c2f7e-3d5c-4a8e-9d43-6a0e7d1f2c3b"));
    // The attacker's pod, bound to this node, with the annotation and even the Node as owner.
    const copy = mirror("steal", "99999999-2222-4333-8444-555555555555");
    u.onPod("ADDED", { ...copy, metadata: { ...copy.metadata, namespace: "team-a" } });
    expect(u.podByUid(STATIC)).toBeUndefined();
    const start = Date.now();
    const clock = vi.spyOn(Date, "now").mockReturnValue(start);
    u.onPod("DELETED", copy);
    expect(u.podByUid(STATIC)).toBeUndefined();
    clock.mockReturnValue(start + 61_000);
    u.onPod("MODIFIED", pod("web", "11111111-2222-4333-8444-555555555555"));
    expect(u.podByUid(STATIC)?.metadata?.name).toBe("etcd-node-1");
  });

  it("takes no mirror annotation that is not a static pod's hash, or not on a pod the Node owns", () => {
    const u = uids();
    u.onPod(
      "ADDED",
      mirror("a", "11111111-2222-4333-8444-000000000001", "11111111-2222-4333-8444-555555555555"),
    );
    u.onPod(
      "ADDED",
      pod("b", "11111111-2222-4333-8444-000000000002", { annotations: { [MIRROR_ANNOTATION]: STATIC } }),
    );
    expect(u.podByUid("11111111-2222-4333-8444-555555555555")).toBeUndefined();
    expect(u.podByUid(STATIC)).toBeUndefined();
  });
});
