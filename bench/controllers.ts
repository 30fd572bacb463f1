/**
 * Controller benchmark against the API server stand-in (real HTTP, real client-node, real
 * safe path resolution over real files; containers are directories, the kernel a recorder):
 *
 *   npm run bench -- controllers        (or: node bench/controllers.ts)
 *
 *   1. one node, 110 pods × 20 traps (2,200 HiveData): time from HivePolicy creation to all
 *      HiveData written, to the kernel map synced by the loader, and to the policy status
 *      showing every inode; API requests of that node by verb; memory.
 *   2. 100 nodes' discover controllers, 5,000 pods (50 per node), one trap: time from policy
 *      creation to all HiveData written; API requests per node by verb (mean and max).
 * The stand-in runs in the same process, so memory figures include its store; the heap
 * growth per HiveData is reported as well. HIVE_BENCH_SCALE=0.2 shrinks the pod counts.
 */
import { cpus, loadavg } from "node:os";
import { GROUP, PLURAL_DATA } from "../api/meta.ts";
import type { HiveTrap } from "../api/policy.ts";
import { Cluster } from "../test/integration/harness.ts";

const scale = Number(process.env.HIVE_BENCH_SCALE ?? "1");
const mib = (n: number) => `${(n / 1048576).toFixed(1)} MiB`;
const cpuText = (u: NodeJS.CpuUsage) =>
  `${((u.user + u.system) / 1e6).toFixed(2)} s (user ${(u.user / 1e6).toFixed(2)}, system ${(u.system / 1e6).toFixed(2)})`;
const loadText = () =>
  `load average ${loadavg()
    .map((l) => l.toFixed(1))
    .join(" ")} on ${cpus().length} CPUs`;

async function until(probe: () => boolean, timeoutMs: number, what: string): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
  return performance.now();
}

/** Pods written straight into the stand-in's store (set-up, not measured), running on `node`. */
function seedPods(
  c: Cluster,
  node: string,
  count: number,
  prefix: string,
  files: Record<string, string>,
): void {
  const def = c.api.resource("pods", "");
  for (let i = 0; i < count; i++) {
    const name = `${prefix}-${i}`;
    const created = c.api.store.create(def, "default", {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name, namespace: "default", labels: { app: "bench" } },
      spec: { nodeName: node, containers: [{ name: "app", image: "busybox" }] },
    });
    const containerID = c.containers.add(`${name}-${created.metadata.uid?.slice(0, 8)}`, files);
    c.api.store.update(
      def,
      "default",
      name,
      {
        ...created,
        status: {
          phase: "Running",
          podIP: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`,
          containerStatuses: [
            {
              name: "app",
              image: "busybox",
              imageID: "",
              ready: true,
              restartCount: 0,
              containerID,
              state: { running: {} },
            },
          ],
        },
      },
      "status",
    );
  }
}

function byVerb(c: Cluster, user: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of c.api.requests) if (r.user === user) out[r.verb] = (out[r.verb] ?? 0) + 1;
  return out;
}

const KERNEL = "dddddddd-4444-4444-8444-444444444444";
/** The agent's defaults (the tests' short leases flap under benchmark load). */
const PRODUCTION_LEASE = { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 };

async function singleNode(): Promise<void> {
  const pods = Math.max(1, Math.round(110 * scale));
  const trapCount = 20;
  const c = await Cluster.start();
  try {
    const files = Object.fromEntries(
      Array.from({ length: trapCount }, (_, i) => [`etc/trap-${i}`, "secret\n"]),
    );
    seedPods(c, "node-1", pods, "pod", files);
    global.gc?.();
    const heap0 = process.memoryUsage().heapUsed;
    const node = await c.addNode("node-1", KERNEL, { lease: PRODUCTION_LEASE });
    await until(
      () => node.agent.ready() && node.agent.loader() !== undefined && node.agent.pods() !== undefined,
      20_000,
      "agent ready",
    );
    c.api.resetRequests();
    const traps: HiveTrap[] = Array.from({ length: trapCount }, (_, i) => ({ path: `/etc/trap-${i}` }));
    const dataDef = c.api.resource(PLURAL_DATA, GROUP);
    const expected = pods * trapCount;
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    await c.createPolicy("bench", traps);
    const tData = await until(() => c.api.store.all(dataDef).length === expected, 300_000, "all HiveData");
    const tKernel = await until(
      () => (node.activeKernel()?.entries.filter((e) => e.kind === "file").length ?? 0) === expected,
      300_000,
      "kernel map",
    );
    const policyDef = c.api.resource("hivepolicies", GROUP);
    const tStatus = await until(
      () => {
        const p = c.api.store.all(policyDef)[0] as
          | { status?: { traps?: { inodesFound: number }[] } }
          | undefined;
        return (p?.status?.traps ?? []).reduce((s, t) => s + t.inodesFound, 0) === expected;
      },
      300_000,
      "policy status",
    );
    const cpu = process.cpuUsage(cpu0);
    const mem = process.memoryUsage();
    console.log(`1. one node, ${pods} pods × ${trapCount} traps = ${expected} HiveData`);
    console.log(
      `   policy created → all HiveData written:   ${((tData - t0) / 1000).toFixed(2)} s (${Math.round(expected / ((tData - t0) / 1000))} HiveData/s)`,
    );
    console.log(`   policy created → kernel map synced:      ${((tKernel - t0) / 1000).toFixed(2)} s`);
    console.log(`   policy created → status shows all inodes: ${((tStatus - t0) / 1000).toFixed(2)} s`);
    console.log(`   CPU used meanwhile (agent + stand-in + client): ${cpuText(cpu)}`);
    console.log(`   API requests of the node by verb: ${JSON.stringify(byVerb(c, "node-1"))}`);
    console.log(
      `   discover passes: ${node.agent.discover.stats().passes}, loader syncs: ${node.agent.loader()?.stats().syncs}`,
    );
    console.log(
      `   memory (agent + stand-in in one process): rss ${mib(mem.rss)}, heap ${mib(mem.heapUsed)}, heap growth since agent start ${mib(mem.heapUsed - heap0)} (${Math.round((mem.heapUsed - heap0) / expected)} B per HiveData, both sides)`,
    );
  } finally {
    await c.stop();
  }
}

async function manyNodes(): Promise<void> {
  const nodeCount = 100;
  const podCount = Math.max(nodeCount, Math.round(5000 * scale));
  const c = await Cluster.start();
  try {
    const perNode = Math.floor(podCount / nodeCount);
    const names = Array.from({ length: nodeCount }, (_, i) => `node-${String(i).padStart(3, "0")}`);
    for (const n of names) seedPods(c, n, perNode, `${n}-pod`, { "etc/shadow": "x\n" });
    global.gc?.();
    const heap0 = process.memoryUsage().heapUsed;
    for (const n of names)
      await c.addNode(n, KERNEL, { loader: false, pods: false, lease: PRODUCTION_LEASE });
    await until(() => c.nodes.every((n) => n.agent.ready()), 120_000, "all discover controllers synced");
    const heapIdle = process.memoryUsage().heapUsed;
    c.api.resetRequests();
    const expected = perNode * nodeCount;
    const dataDef = c.api.resource(PLURAL_DATA, GROUP);
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    await c.createPolicy("shadow", [{ path: "/etc/shadow" }]);
    const tData = await until(() => c.api.store.all(dataDef).length === expected, 600_000, "all HiveData");
    const cpu = process.cpuUsage(cpu0);
    const mem = process.memoryUsage();
    const verbs = new Map<string, number[]>();
    for (const n of names)
      for (const [v, k] of Object.entries(byVerb(c, n))) verbs.set(v, [...(verbs.get(v) ?? []), k]);
    const summary = Object.fromEntries(
      [...verbs].map(([v, ks]) => [
        v,
        { mean: +(ks.reduce((a, b) => a + b, 0) / nodeCount).toFixed(1), max: Math.max(...ks) },
      ]),
    );
    console.log(`2. ${nodeCount} nodes' discover controllers, ${expected} pods, one trap`);
    console.log(`   policy created → all HiveData written: ${((tData - t0) / 1000).toFixed(2)} s`);
    console.log(`   CPU used meanwhile (100 agents + stand-in in one process): ${cpuText(cpu)}`);
    console.log(`   API requests per node by verb (after the policy): ${JSON.stringify(summary)}`);
    console.log(
      `   open watches on the stand-in: ${c.api.watchCount()} (3 per node: policies, own pods, own HiveData)`,
    );
    console.log(
      `   memory: rss ${mib(mem.rss)}; heap of ${nodeCount} idle agents ${mib(heapIdle - heap0)} (${mib((heapIdle - heap0) / nodeCount)} each); heap at end ${mib(mem.heapUsed)}`,
    );
  } finally {
    await c.stop();
  }
}

export async function run(): Promise<void> {
  console.log(
    `(scale ${scale}; reproduce: npm run bench -- controllers, or HIVE_BENCH_SCALE=${scale} node --expose-gc bench/controllers.ts)`,
  );
  console.log(`machine: ${loadText()} (wall times stretch on a shared machine; CPU seconds do not)`);
  await singleNode();
  await manyNodes();
  console.log(`machine after: ${loadText()}`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  await run();
  process.exit(0);
}
