/**
 * PolicyReports at scale (`npm run bench -- reports`): 50,000 pods in 1,000 namespaces, one trap
 * each, as the elected writer holds them (HiveData, folded accesses), against an in-memory server
 * that echoes writes back as a watch does. Prints, as ratios against a baseline of the same run:
 * - the writer's heap with every pod failing after 1,000,000 accesses, against the same writer
 *   after one access per pod (memory must follow pods × traps, not accesses);
 * - one recompute pass over all pods, in ms (absolute, for the record);
 * - report writes per namespace per debounce while every namespace changes all the time (≤ 1).
 * Figures, not a pass/fail: scale with HIVE_BENCH_SCALE (default 1).
 */
import type { CoreV1Event } from "@kubernetes/client-node";
import type { HiveData } from "../api/data.ts";
import { trapId } from "../api/ids.ts";
import type { HivePolicy } from "../api/policy.ts";
import { ANNOTATION_ACCESS, type PolicyReport } from "../api/report.ts";
import { createLogger } from "../runtime/log.ts";
import { createPolicyReports, type PolicyReports } from "../runtime/reports/policy-reports.ts";
import type { ReportClient } from "../runtime/reports/report-writer.ts";

const scale = Number(process.env.HIVE_BENCH_SCALE ?? "1");
const NAMESPACES = Math.max(10, Math.round(1000 * scale));
const PODS_PER_NS = 50;
const ACCESSES = Math.round(1_000_000 * scale);
const DEBOUNCE_MS = 200;

const policy: HivePolicy = {
  apiVersion: "hive-operator.com/v1alpha1",
  kind: "HivePolicy",
  metadata: { name: "shadow", namespace: "hive-system" },
  spec: { traps: [{ path: "/etc/shadow" }] },
};
const TRAP = trapId({ namespace: "hive-system", name: "shadow" }, policy.spec.traps[0] ?? { path: "" });

function data(): HiveData[] {
  const out: HiveData[] = [];
  for (let n = 0; n < NAMESPACES; n++)
    for (let p = 0; p < PODS_PER_NS; p++)
      out.push({
        metadata: {
          labels: {
            "trap-id": TRAP,
            "hive-operator.com/policy": "shadow",
            "hive-operator.com/policy-namespace": "hive-system",
          },
          annotations: {
            namespace: `ns-${n}`,
            pod_name: `pod-${p}`,
            pod_uid: `${n}-${p}`,
            container_name: "app",
          },
        },
      } as unknown as HiveData);
  return out;
}

function accessEvent(n: number, p: number, count: number): CoreV1Event {
  return {
    metadata: {
      name: `pod-${p}.hive-0123456789`,
      namespace: `ns-${n}`,
      labels: { "trap-id": TRAP },
      annotations: {
        [ANNOTATION_ACCESS]: JSON.stringify({
          policy: "hive-system/shadow",
          accesses: "read",
          exe: "/usr/bin/cat",
          parentExe: "/bin/sh",
          alertId: "0b9f5a6e-1d1f-4c51-9d7a-3f1c2b9e8a71",
          container: "app",
        }),
      },
    },
    involvedObject: { kind: "Pod", name: `pod-${p}`, namespace: `ns-${n}` },
    reportingInstance: "node-0",
    count,
    lastTimestamp: new Date() as unknown as Date,
  };
}

/** An in-memory API server: holds reports, echoes each write through `observe`, counts writes. */
function memoryServer() {
  let reports: PolicyReports | undefined;
  let version = 0;
  const counter = { writes: 0 };
  const echo = (r: PolicyReport) => {
    counter.writes += 1;
    const held = { ...r, metadata: { ...r.metadata, resourceVersion: String(++version) } };
    queueMicrotask(() => reports?.onReport("MODIFIED", held));
  };
  const client: ReportClient = {
    create: async (r) => echo(r),
    replace: async (r) => echo(r),
    remove: async () => {},
  };
  return { client, counter, attach: (r: PolicyReports) => (reports = r) };
}

const heapMiB = () => {
  globalThis.gc?.();
  return process.memoryUsage().heapUsed / 2 ** 20;
};

async function writer(objects: HiveData[]) {
  const server = memoryServer();
  const reports = createPolicyReports({
    client: server.client,
    log: createLogger({}, { level: "error" }),
    nodeName: "bench",
    format: "policyreport",
    platformNamespace: "hive-system",
    debounceMs: DEBOUNCE_MS,
    // Every pod on the node that wrote its Events (the API server's answer, without a server).
    placement: async () => ({ node: "node-0" }),
    onFolded: () => {},
  });
  server.attach(reports);
  reports.markSynced();
  const update = () => reports.update({ policies: [policy], data: objects, trapErrors: [], uncovered: [] });
  return { reports, server, update };
}

export async function run(): Promise<void> {
  const objects = data();
  const pods = NAMESPACES * PODS_PER_NS;
  console.log(`${pods} pods in ${NAMESPACES} namespaces, one trap; ${ACCESSES} accesses`);

  // Baseline: every pod failing after one access each; then the same writer after all accesses.
  const w = await writer(objects);
  const heapStart = heapMiB();
  const counts = new Map<number, number>();
  const access = (pod: number) => {
    const count = (counts.get(pod) ?? 0) + 1;
    counts.set(pod, count);
    w.reports.onAccessEvent("MODIFIED", accessEvent(Math.floor(pod / PODS_PER_NS), pod % PODS_PER_NS, count));
  };
  for (let pod = 0; pod < pods; pod++) access(pod);
  await new Promise((r) => setImmediate(r)); // each pod's placement looked up once
  w.update();
  await w.reports.flush();
  const baseHeap = heapMiB() - heapStart;
  for (let i = pods; i < ACCESSES; i++) access(i % pods);
  await new Promise((r) => setTimeout(r, DEBOUNCE_MS));
  const passStart = performance.now();
  w.update();
  const passMs = performance.now() - passStart;
  await w.reports.flush();
  const failHeap = heapMiB() - heapStart;
  console.log(
    `writer heap: ${failHeap.toFixed(1)} MiB after ${ACCESSES} accesses, ${baseHeap.toFixed(1)} MiB after ` +
      `${pods} (one per pod): ratio ${(failHeap / baseHeap).toFixed(2)}; ` +
      `${((failHeap * 2 ** 20) / pods).toFixed(0)} bytes per failing pod × trap`,
  );
  console.log(`one recompute pass over ${pods} pods: ${passMs.toFixed(0)} ms`);

  // Every namespace changes all the time for 10 debounces: writes per namespace per debounce.
  await new Promise((r) => setTimeout(r, DEBOUNCE_MS));
  const before = w.server.counter.writes;
  const rounds = 10;
  const until = Date.now() + rounds * DEBOUNCE_MS;
  let changes = 0;
  while (Date.now() < until) {
    for (let n = 0; n < NAMESPACES; n++) {
      access(n * PODS_PER_NS);
      changes += 1;
    }
    w.update();
    await new Promise((r) => setTimeout(r, 20));
  }
  await w.reports.flush();
  const writes = w.server.counter.writes - before;
  console.log(
    `${changes} access changes over ${rounds} debounces: ${writes} report writes, ` +
      `${(writes / NAMESPACES / rounds).toFixed(2)} per namespace per debounce (bound 1); ` +
      `at the default 30 s debounce: at most ${(2 * NAMESPACES).toLocaleString("en")} writes per minute for ${NAMESPACES} namespaces`,
  );
  w.reports.stop();
}
