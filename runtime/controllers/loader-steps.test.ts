import { describe, expect, it } from "vitest";
import type { HiveData } from "../../api/data.ts";
import { trapId } from "../../api/ids.ts";
import { LABEL_KERNEL_ID, LABEL_NODE, LABEL_TRAP_ID } from "../../api/meta.ts";
import type { HivePolicy } from "../../api/policy.ts";
import type { KernelEvent } from "../kernel/contract.ts";
import { createLogger } from "../log.ts";
import { deliveryOf } from "./event-router.ts";
import { ANNOTATION_IMAGE_LAYER } from "./hive-data.ts";
import type { ArmedData, LiveTrap } from "./live-traps.ts";
import { LoaderCache } from "./loader-cache.ts";
import { Orphans } from "./loader-orphans.ts";

const KERNEL = "k1";
const policy: HivePolicy = {
  apiVersion: "hive-operator.com/v1alpha1",
  kind: "HivePolicy",
  metadata: { name: "p", namespace: "hive", generation: 1 },
  spec: { traps: [{ path: "/etc/shadow" }] },
};
const TRAP = trapId({ namespace: "hive", name: "p" }, { path: "/etc/shadow" });

function data(name: string, node = "n1", layer = false): HiveData {
  return {
    apiVersion: "hive-operator.com/v1alpha1",
    kind: "HiveData",
    metadata: {
      name,
      namespace: "default",
      labels: { [LABEL_TRAP_ID]: TRAP, [LABEL_KERNEL_ID]: KERNEL, [LABEL_NODE]: node },
      ...(layer ? { annotations: { [ANNOTATION_IMAGE_LAYER]: "true" } } : {}),
    },
    spec: { "inode-no": 1, "kernel-id": KERNEL, device: { major: 8, minor: 1 }, accesses: ["read"] },
  };
}

const orphans = () =>
  new Orphans({
    graceMs: 1000,
    nodeName: "n1",
    writer: {} as never,
    log: createLogger({}, { level: "error" }),
    stats: { orphansDeleted: 0 },
    retryIn: () => undefined,
  });

describe("an orphan's verdict", () => {
  it("waits out its grace, counted from when it was first seen", () => {
    const o = orphans();
    expect(o.verdict("default/a", data("a"), 10_000)).toEqual({ waitMs: 1000 });
    expect(o.verdict("default/a", data("a"), 10_400)).toEqual({ waitMs: 600 });
    expect(o.verdict("default/a", data("a"), 11_000)).toEqual({ delete: true });
  });

  it("leaves another node's orphan to that node", () => {
    const o = orphans();
    o.verdict("default/b", data("b", "n2"), 0);
    expect(o.verdict("default/b", data("b", "n2"), 5000)).toEqual({ leave: true });
  });

  it("starts its grace again once forgotten", () => {
    const o = orphans();
    o.verdict("default/a", data("a"), 0);
    o.forget("default/a");
    expect(o.verdict("default/a", data("a"), 5000)).toEqual({ waitMs: 1000 });
  });
});

describe("the loader's cache", () => {
  it("says when a policy event changes traps, not for a status write", () => {
    const cache = new LoaderCache(KERNEL);
    expect(cache.onPolicy("ADDED", policy)).toBe(true);
    expect(cache.onPolicy("MODIFIED", { ...policy, status: { conditions: [] } })).toBe(false);
    expect(cache.trapOf(data("a"))?.trapId).toBe(TRAP);
    expect(cache.onPolicy("DELETED", policy)).toBe(true);
    expect(cache.trapOf(data("a"))).toBeUndefined();
  });

  it("drops what only the snapshot held once the lists are in", () => {
    const cache = new LoaderCache(KERNEL, {
      policies: [policy],
      data: [data("a"), data("b"), { ...data("c"), metadata: { ...data("c").metadata, labels: {} } }],
      savedAt: "",
    });
    expect([...cache.data.keys()]).toEqual(["default/a", "default/b"]);
    cache.onData("MODIFIED", data("b"));
    cache.settle();
    expect([...cache.data.keys()]).toEqual(["default/b"]);
    expect(cache.trapOf(data("b"))).toBeUndefined();
  });
});

describe("an access's delivery", () => {
  const trap: LiveTrap = {
    trapId: TRAP,
    policy: { namespace: "hive", name: "p" },
    trap: { path: "/etc/shadow" },
  };
  const event = { kind: "file", key: { major: 8, minor: 1, ino: 1n } } as KernelEvent;
  const own: ArmedData = { data: data("own"), trap };
  const layer: ArmedData = { data: data("layer", "n1", true), trap };

  it("goes to a container's own traps without asking where it came from", () => {
    let asked = false;
    const origin = () => {
      asked = true;
      return null;
    };
    expect(deliveryOf(event, [own], origin, "hive")).toEqual({ armed: [own] });
    expect(asked).toBe(false);
  });

  it("to an image layer's file: dropped from no pod's container, waits for one not named yet", () => {
    expect(deliveryOf(event, [layer], () => null, "hive")).toEqual({ drop: { dropped: "unselected" } });
    expect(deliveryOf(event, [layer], () => undefined, "hive")).toEqual({
      drop: { dropped: "unattributed" },
    });
    expect(deliveryOf(event, [layer], () => "pod-unknown", "hive")).toEqual({ wait: true });
  });

  it("still reaches the traps of the file's own HiveData when the layer's select nobody", () => {
    expect(deliveryOf(event, [layer, own], () => "pod-unknown", "hive")).toEqual({ armed: [own] });
  });
});
