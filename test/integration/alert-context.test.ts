/**
 * What an alert says about its pod when the node that loads the kernel program is not the node
 * that runs the pod (nodes sharing one kernel, as kind's do): the loader's agent never watches
 * that pod, so the pod's labels, workload and image must come in the HiveData the pod's own node
 * wrote, through a real API server and the CRD schema it enforces.
 */
import { AppsV1Api } from "@kubernetes/client-node";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { Alert } from "../../api/alert.ts";
import { createAlertPipeline } from "../../runtime/alerts/pipeline.ts";
import { createHiveMetrics } from "../../runtime/metrics/metrics.ts";
import { assertValidAlert, captureLogger } from "../alerts/fixtures.ts";
import { Cluster, eventually, type HiveApi, startHiveApi } from "./harness.ts";

const SHARED_KERNEL = "22222222-2222-4222-8222-222222222222";

let hive: HiveApi | undefined;
beforeAll(async () => {
  hive = await startHiveApi();
});
afterAll(async () => {
  await hive?.stop();
});
let cluster: Cluster | undefined;
afterEach(async () => {
  await cluster?.stop();
  cluster = undefined;
});

describe("alert context across nodes sharing a kernel", () => {
  it("alerts with the severity and labels of the trap and the pod's labels, Deployment and image found by the pod's node", async () => {
    cluster = await Cluster.start(hive as HiveApi);
    const c = cluster;
    const lines: string[] = [];
    const alerts = await createAlertPipeline({
      logger: captureLogger().logger,
      metrics: createHiveMetrics({ processMetrics: false }),
      lines: (l) => lines.push(l),
      rateLimit: false,
    });
    // node-1 loads the shared kernel's program; node-2 runs the pod and never loads it.
    const loader = await c.addNode("node-1", SHARED_KERNEL, { alerts });
    await c.addNode("node-2", SHARED_KERNEL, { loader: false, pods: false });
    // The ReplicaSet a Deployment "web" made (the agent may not read it: the name tells the
    // Deployment). Its controller (kube-controller-manager's) makes the pod, here already bound to
    // node-2 (no scheduler runs), whose kubelet then reports it running.
    const selector = { matchLabels: { app: "web", "pod-template-hash": "7d9c5b8f4" } };
    await c.api
      .kubeConfig()
      .makeApiClient(AppsV1Api)
      .createNamespacedReplicaSet({
        namespace: "default",
        body: {
          metadata: { name: "web-7d9c5b8f4" },
          spec: {
            replicas: 1,
            selector,
            template: {
              metadata: { labels: selector.matchLabels },
              spec: { nodeName: "node-2", containers: [{ name: "app", image: "busybox" }] },
            },
          },
        },
      });
    const made = await eventually(async () => {
      const list = await c.admin.core.listNamespacedPod({
        namespace: "default",
        labelSelector: "app=web,pod-template-hash=7d9c5b8f4",
      });
      return list.items.length === 1 ? list.items[0] : undefined;
    }, "the ReplicaSet's pod");
    const podName = made.metadata?.name ?? "";
    expect(podName).toMatch(/^web-7d9c5b8f4-[a-z0-9]{5}$/);
    expect(made.metadata?.ownerReferences?.[0]).toMatchObject({ kind: "ReplicaSet", name: "web-7d9c5b8f4" });
    await c.runPod(made, "10.0.0.7");
    await c.createPolicy("secrets", [
      { path: "/etc/shadow", severity: "critical", labels: { team: "payments" } },
    ]);

    const [data] = await eventually(async () => {
      const d = await c.data();
      return d.length === 1 ? d : undefined;
    }, "HiveData written by node-2");
    expect(data?.metadata.labels?.["hive-operator.com/node"]).toBe("node-2");
    expect(data?.spec.pod).toEqual({
      labels: { app: "web", "pod-template-hash": "7d9c5b8f4" },
      workload: { kind: "Deployment", name: "web" },
      image: "busybox",
    });
    const kernel = await eventually(() => {
      const k = loader.activeKernel();
      return k?.entries.some((e) => e.kind === "file") ? k : undefined;
    }, "node-1's kernel map holds the file");
    const file = kernel.entries.find((e) => e.kind === "file");
    kernel.emit({ slot: file?.slot ?? -1, kind: "file", key: file?.key });

    const alert = JSON.parse(await eventually(() => lines[0], "an alert")) as Alert;
    await alerts.close();
    assertValidAlert(alert);
    expect(alert).toMatchObject({
      severity: "critical",
      labels: { team: "payments" },
      node: { name: "node-2" },
      pod: {
        name: podName,
        namespace: "default",
        container: { name: "app", image: "busybox" },
        labels: { app: "web", "pod-template-hash": "7d9c5b8f4" },
        workload: { kind: "Deployment", name: "web" },
      },
    });
  });
});
