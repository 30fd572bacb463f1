/**
 * The pods role watches every pod of the cluster: its cache must cost a small amount per pod,
 * whatever the size of the Pod objects. Measured on the retained heap after a LIST of large pods.
 */
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import type { V1Pod } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import type { KubeClients } from "../k8s/kube-client.ts";
import { createLogger } from "../log.ts";
import { allPodFeed } from "./feeds.ts";

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

/** A pod as large clusters hold them: several containers with env, a big annotation, managed fields. */
function bigPod(i: number, annotationBytes = 8000): V1Pod {
  const env = Array.from({ length: 40 }, (_, k) => ({
    name: `VAR_${k}_${i}`,
    value: `value-${k}-${i}-`.repeat(4),
  }));
  return {
    metadata: {
      name: `pod-${i}`,
      namespace: `ns-${i % 50}`,
      uid: `00000000-0000-4000-8000-${String(i).padStart(12, "0")}`,
      resourceVersion: String(1000 + i),
      labels: { app: `app-${i % 100}`, "pod-template-hash": `h${i}` },
      annotations: {
        "kubectl.kubernetes.io/last-applied-configuration": `{"spec":"${"x".repeat(annotationBytes)}${i}"}`,
      },
      managedFields: [
        { manager: "kubelet", operation: "Update", fieldsV1: { f: `${"y".repeat(2000)}${i}` } },
      ],
    },
    spec: {
      nodeName: `node-${i % 1000}`,
      containers: ["app", "sidecar", "proxy"].map((name) => ({ name, image: `registry/${name}:${i}`, env })),
    },
    status: {
      phase: "Running",
      podIP: `10.0.${i >> 8}.${i & 255}`,
      containerStatuses: ["app", "sidecar", "proxy"].map((name) => ({
        name,
        containerID: `containerd://${name}${String(i).padStart(58, "0")}`,
        image: `registry/${name}:${i}`,
        imageID: `sha256:${"a".repeat(64)}`,
        ready: true,
        restartCount: 0,
        state: { running: { startedAt: new Date(0) } },
      })),
    },
  };
}

/** Clients whose LIST makes pages of big pods on the fly (nothing else holds them) and whose watch stays quiet. */
function fakeClients(count: number, annotationBytes: number): KubeClients {
  const core = {
    listPodForAllNamespaces: async (q: { limit?: number; _continue?: string }) => {
      const from = Number(q._continue ?? 0);
      const to = Math.min(count, from + (q.limit ?? count));
      const items = Array.from({ length: to - from }, (_, k) => bigPod(from + k, annotationBytes));
      return {
        items,
        metadata: { resourceVersion: "5000", ...(to < count ? { _continue: String(to) } : {}) },
      };
    },
  };
  // Quiet until aborted; then it ends the way client-node's Watch does (done called).
  const watch = {
    watch: async (_path: string, _query: unknown, _event: unknown, done: (err: unknown) => void) => {
      const controller = new AbortController();
      controller.signal.addEventListener("abort", () => done(null));
      return controller;
    },
  };
  return { core, watch } as unknown as KubeClients;
}

const quiet = createLogger({}, { level: "error", sink: () => {} });

async function retainedPerPod(
  count: number,
  annotationBytes: number,
): Promise<{ perPod: number; sample: V1Pod | undefined }> {
  gc();
  const before = process.memoryUsage().heapUsed;
  let delivered = 0;
  const informer = allPodFeed(() => void delivered++, {
    clients: fakeClients(count, annotationBytes),
    log: quiet,
    pageSize: 250,
  });
  await informer.start();
  gc();
  const after = process.memoryUsage().heapUsed;
  const sample = informer.list()[0];
  expect(informer.list()).toHaveLength(count);
  expect(delivered).toBe(count);
  await informer.stop();
  return { perPod: (after - before) / count, sample };
}

describe("the pods role's cache of every pod in the cluster", () => {
  it("keeps what the pods role uses of each pod, under 2 KiB per pod however large the pods are", async () => {
    expect(JSON.stringify(bigPod(1)).length).toBeGreaterThan(20_000);
    const { perPod, sample } = await retainedPerPod(3000, 8_000);
    expect(perPod).toBeLessThan(2048);
    // Four times the annotations: the same cost per pod (whole pods: about 13 KiB each here, and growing).
    const huge = await retainedPerPod(3000, 32_000);
    expect(huge.perPod).toBeLessThan(2048);
    expect(Math.abs(huge.perPod - perPod)).toBeLessThan(256);
    expect(sample?.metadata).toEqual({
      name: "pod-0",
      namespace: "ns-0",
      uid: "00000000-0000-4000-8000-000000000000",
      resourceVersion: "1000",
    });
    expect(sample?.spec?.nodeName).toBe("node-0");
    expect(sample?.status?.phase).toBe("Running");
    expect(sample?.status?.containerStatuses?.map((c) => [c.name, c.containerID?.slice(0, 17)])).toEqual([
      ["app", "containerd://app0"],
      ["sidecar", "containerd://side"],
      ["proxy", "containerd://prox"],
    ]);
  });
});
