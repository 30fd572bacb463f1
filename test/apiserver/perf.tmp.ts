import { CoreV1Api, CustomObjectsApi } from "@kubernetes/client-node";
import { startApiServer } from "./server.ts";
import { podBody } from "./testing.ts";

const api = await startApiServer();
const core = api.kubeConfig().makeApiClient(CoreV1Api);
const custom = api.kubeConfig().makeApiClient(CustomObjectsApi);
let t = performance.now();
const N = 3000;
async function pool(n: number, conc: number, fn: (i: number) => Promise<unknown>) {
  let i = 0;
  await Promise.all(
    Array.from({ length: conc }, async () => {
      while (i < n) {
        const k = i++;
        await fn(k);
      }
    }),
  );
}
await pool(N, 32, (i) =>
  core.createNamespacedPod({
    namespace: "default",
    body: podBody(`pod-${i}`, { node: `node-${i % 100}`, labels: { security: i % 2 ? "high" : "low" } }),
  }),
);
console.log("create pods/s", (N / ((performance.now() - t) / 1000)).toFixed(0));
t = performance.now();
await pool(100, 8, (i) =>
  core.listPodForAllNamespaces({ fieldSelector: `spec.nodeName=node-${i}`, limit: 500 }),
);
console.log("100 node lists ms", (performance.now() - t).toFixed(0));
t = performance.now();
const D = 10000;
await pool(D, 32, (i) =>
  custom.createNamespacedCustomObject({
    group: "hive-operator.com",
    version: "v1alpha1",
    plural: "hivedata",
    namespace: "default",
    body: {
      apiVersion: "hive-operator.com/v1alpha1",
      kind: "HiveData",
      metadata: { name: `d-${i}`, labels: { "hive-operator.com/kernel-id": `k${i % 10}` } },
      spec: {
        "inode-no": i + 1,
        "kernel-id": "0b5e2c8a-9a4e-4a8e-9d86-3c55d0c1d6a1",
        device: { major: 8, minor: 1 },
        accesses: ["read"],
      },
    },
  }),
);
console.log("create hivedata/s", (D / ((performance.now() - t) / 1000)).toFixed(0));
t = performance.now();
await pool(100, 8, (i) =>
  custom.listNamespacedCustomObject({
    group: "hive-operator.com",
    version: "v1alpha1",
    plural: "hivedata",
    namespace: "default",
    labelSelector: `hive-operator.com/kernel-id=k${i % 10}`,
    limit: 500,
  }),
);
console.log("100 hivedata lists ms", (performance.now() - t).toFixed(0));
console.log("rss MB", (process.memoryUsage().rss / 1e6).toFixed(0));
t = performance.now();
await pool(1000, 16, (i) => core.deleteNamespacedPod({ namespace: "default", name: `pod-${i}` }));
console.log("delete pods/s", (1000 / ((performance.now() - t) / 1000)).toFixed(0));
await api.stop();
