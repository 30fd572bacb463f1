/**
 * A layer access that waits for its pod (attribution-retry.ts) keeps its ring space: the kernel
 * does not consume it until it is routed or given up, so that an agent restarted meanwhile (a
 * rollout, a liveness kill) leaves it to the next one instead of losing the read.
 */
import type { V1Pod } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { trapId } from "../../api/ids.ts";
import type { HivePolicy } from "../../api/policy.ts";
import { waitFor } from "../../test/cluster/testing.ts";
import { loaderWith } from "../../test/fixtures/layer-loader.ts";
import { buildLayerData } from "./hive-data.ts";
import type { AttributeAccess } from "./layer-routing.ts";

const KERNEL = "eeeeeeee-6666-4666-8666-666666666666";
const LAYER = { major: 8, minor: 1, ino: 500n };
const policy: HivePolicy = {
  apiVersion: "hive-operator.com/v1alpha1",
  kind: "HivePolicy",
  metadata: { name: "shadow", namespace: "hive-system", generation: 1 },
  spec: { traps: [{ path: "/etc/shadow", match: { matchLabels: { security: "high" } } }] },
};
const jobPod: V1Pod = {
  metadata: { name: "first-read-x", namespace: "apps", uid: "uid-job", labels: { security: "high" } },
  spec: { nodeName: "n1", containers: [{ name: "reader" }] },
};

async function layerLoader(attribute: AttributeAccess) {
  const { kernel, loader, routed, dropped } = loaderWith(KERNEL, attribute);
  loader.onPolicy("ADDED", policy);
  const trap = policy.spec.traps[0] ?? { path: "" };
  loader.onData(
    "ADDED",
    buildLayerData({
      policy,
      trap,
      trapId: trapId({ namespace: "hive-system", name: "shadow" }, trap),
      kernelId: KERNEL,
      nodeName: "n1",
      namespace: "hive-system",
      file: LAYER,
    }),
  );
  loader.markSynced();
  await loader.idle();
  const slot = kernel.entries.find((e) => e.kind === "file")?.slot ?? -1;
  const read = () => kernel.emit({ slot, kind: "file", group: slot, cgroupId: 42n });
  return { kernel, loader, routed, dropped, read };
}

describe("a layer access whose pod is not known yet", () => {
  it("is not consumed in the kernel while it waits, and is once routed", async () => {
    let known = false;
    const origin = {
      pod: jobPod,
      containerId: "c".repeat(64),
      scheme: "containerd",
      containerName: "reader",
    };
    const { kernel, loader, routed, read } = await layerLoader(() => (known ? origin : "pod-unknown"));
    try {
      const before = kernel.holds;
      read();
      expect(kernel.holds).toBe(before + 1);
      known = true; // the pod list came in
      await waitFor(() => routed.length > 0, { timeoutMs: 5000, intervalMs: 20, what: "the access routed" });
      expect(kernel.holds).toBe(before);
    } finally {
      await loader.stop();
    }
  });

  it("is left in the kernel's ring for the next agent when this one stops, not counted lost", async () => {
    const { kernel, loader, dropped, read } = await layerLoader(() => "pod-unknown");
    const before = kernel.holds;
    read();
    await loader.stop();
    expect(kernel.holds).toBe(before + 1);
    expect(dropped).toEqual([]);
  });
});
