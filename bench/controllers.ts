/**
 * Controller benchmark against a real kube-apiserver (etcd, kube-controller-manager) with Hive
 * installed from its rendering, the agents authenticated by tokens bound to their Pods (real
 * HTTP, real client-node, real safe path resolution over real files; containers are
 * directories, the kernel a recorder). The fault proxy in front records every request with the
 * node its token names (test/integration/harness.ts):
 *
 *   npm run bench -- controllers        (or: node bench/controllers.ts)
 *
 *   1. one node, 110 pods × 20 traps (2,200 HiveData): time from HivePolicy creation to all
 *      HiveData written, to the kernel map synced by the loader, and to the policy status
 *      showing every inode; API requests of that node by verb; memory.
 *   2. 100 nodes' discover controllers, 5,000 pods (50 per node), one trap: time from policy
 *      creation to all HiveData written; API requests per node by verb (mean and max).
 *   3. the agent as its own `hive agent` process: the same as 1, its own memory.
 *   4–6. at cluster scale (cluster-scale.ts): the pods-role holder's RSS at 1k, 10k and 50k
 *      pods; API requests per idle node per minute by verb; 1,000 nodes starting at once and
 *      where the server served their LISTs from (its own metrics: watch cache or etcd).
 * In 1 and 2 the agents run in this process (the server in its own), so memory figures are the
 * agents' and their clients'; the heap growth per HiveData is reported as well. "All HiveData
 * written" is when the proxy has seen that many HiveData creates answered 201; the count stored
 * is checked after. HIVE_BENCH_SCALE=0.2 shrinks the pod and node counts (and the idle window);
 * HIVE_BENCH_ONLY=1,4 runs only the named sections.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { CoreV1Api, CustomObjectsApi } from "@kubernetes/client-node";
import { GROUP, PLURAL_DATA, PLURAL_POLICY, VERSION } from "../api/meta.ts";
import type { HivePolicy, HiveTrap } from "../api/policy.ts";
import { DEFAULT_LEASE } from "../runtime/k8s/lease.ts";
import type { RequestRecord } from "../test/cluster/fault-proxy.ts";
import { waitFor } from "../test/cluster/testing.ts";
import { Cluster, type HiveApi, spawnAgentProcess, startHiveApi } from "../test/integration/harness.ts";
import { idleRequests, podsRoleMemory, startAtOnce } from "./cluster-scale.ts";
import { createNodes, createRunningPods } from "./seed-pods.ts";

const scale = Number(process.env.HIVE_BENCH_SCALE ?? "1");
const mib = (n: number) => `${(n / 1048576).toFixed(1)} MiB`;
const cpuText = (u: NodeJS.CpuUsage) =>
  `${((u.user + u.system) / 1e6).toFixed(2)} s (user ${(u.user / 1e6).toFixed(2)}, system ${(u.system / 1e6).toFixed(2)})`;
const loadText = () =>
  `load average ${loadavg()
    .map((l) => l.toFixed(1))
    .join(" ")} on ${cpus().length} CPUs`;

/** Waits for `probe` and returns when it held (performance.now()). */
async function until(
  probe: () => boolean | Promise<boolean>,
  timeoutMs: number,
  what: string,
  intervalMs = 5,
): Promise<number> {
  await waitFor(probe, { timeoutMs, what, intervalMs });
  return performance.now();
}

/** HiveData creates the server answered 201, as the proxy saw them (of `node`'s agent, or any). */
const dataCreated = (requests: readonly RequestRecord[], node?: string) =>
  requests.filter(
    (r) =>
      r.verb === "create" &&
      r.resource === PLURAL_DATA &&
      r.code === 201 &&
      (node === undefined || r.node === node),
  ).length;

/** Pods running on `node`, each container a directory holding `files`, many created at once. */
async function seedPods(
  c: Cluster,
  node: string,
  count: number,
  prefix: string,
  files: Record<string, string>,
): Promise<void> {
  const core = c.api.cp.adminKubeConfig().makeApiClient(CoreV1Api);
  await createRunningPods(
    core,
    Array.from({ length: count }, (_, i) => ({
      metadata: { name: `${prefix}-${i}`, namespace: "default", labels: { app: "bench" } },
      spec: { nodeName: node, containers: [{ name: "app", image: "busybox" }] },
    })),
    (created, i) => ({
      phase: "Running",
      podIP: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`,
      containerStatuses: [
        {
          name: "app",
          image: "busybox",
          imageID: "",
          ready: true,
          restartCount: 0,
          containerID: c.containers.add(
            `${created.metadata?.name}-${created.metadata?.uid?.slice(0, 8)}`,
            files,
          ),
          state: { running: {} },
        },
      ],
    }),
    8,
  );
}

function byVerb(c: Cluster, node: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of c.api.requests) if (r.node === node) out[r.verb] = (out[r.verb] ?? 0) + 1;
  return out;
}

const KERNEL = "dddddddd-4444-4444-8444-444444444444";

/** The HiveData stored, counted by the server (a one-item page and its remaining count). */
async function storedData(c: Cluster): Promise<number> {
  const page = (await c.admin.custom.listClusterCustomObject({
    group: GROUP,
    version: VERSION,
    plural: PLURAL_DATA,
    limit: 1,
  })) as { items: unknown[]; metadata?: { remainingItemCount?: number } };
  return page.items.length + (page.metadata?.remainingItemCount ?? 0);
}

async function singleNode(): Promise<void> {
  const pods = Math.max(1, Math.round(110 * scale));
  const trapCount = 20;
  const hive = await startHiveApi();
  const c = await Cluster.start(hive);
  try {
    const files = Object.fromEntries(
      Array.from({ length: trapCount }, (_, i) => [`etc/trap-${i}`, "secret\n"]),
    );
    await c.ensureNode("node-1", KERNEL);
    await seedPods(c, "node-1", pods, "pod", files);
    global.gc?.();
    const heap0 = process.memoryUsage().heapUsed;
    const node = await c.addNode("node-1", KERNEL, {
      // The agent's default lease: the tests' short ones flap under benchmark load.
      lease: DEFAULT_LEASE,
    });
    await until(
      () => node.agent.ready() && node.agent.loader() !== undefined && node.agent.pods() !== undefined,
      60_000,
      "agent ready",
    );
    c.api.resetRequests();
    const traps: HiveTrap[] = Array.from({ length: trapCount }, (_, i) => ({ path: `/etc/trap-${i}` }));
    const expected = pods * trapCount;
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    await c.createPolicy("bench", traps);
    const tData = await until(
      () => dataCreated(c.api.requests, "node-1") >= expected,
      300_000,
      "all HiveData",
    );
    const tKernel = await until(
      () => (node.activeKernel()?.entries.filter((e) => e.kind === "file").length ?? 0) === expected,
      300_000,
      "kernel map",
    );
    const tStatus = await until(
      async () => {
        const p = (await c.getPolicy("bench")) as HivePolicy | undefined;
        return (p?.status?.traps ?? []).reduce((s, t) => s + t.inodesFound, 0) === expected;
      },
      300_000,
      "policy status",
      50,
    );
    const cpu = process.cpuUsage(cpu0);
    const mem = process.memoryUsage();
    const stored = await storedData(c);
    if (stored !== expected) throw new Error(`the server holds ${stored} HiveData, not ${expected}`);
    console.log(`1. one node, ${pods} pods × ${trapCount} traps = ${expected} HiveData`);
    console.log(
      `   policy created → all HiveData written:   ${((tData - t0) / 1000).toFixed(2)} s (${Math.round(expected / ((tData - t0) / 1000))} HiveData/s)`,
    );
    console.log(`   policy created → kernel map synced:      ${((tKernel - t0) / 1000).toFixed(2)} s`);
    console.log(`   policy created → status shows all inodes: ${((tStatus - t0) / 1000).toFixed(2)} s`);
    console.log(`   CPU used meanwhile in this process (agent + client; the server apart): ${cpuText(cpu)}`);
    console.log(`   API requests of the node by verb: ${JSON.stringify(byVerb(c, "node-1"))}`);
    console.log(
      `   discover passes: ${node.agent.discover.stats().passes}, loader syncs: ${node.agent.loader()?.stats().syncs}`,
    );
    console.log(
      `   memory of this process (the agent, its client and the bench): rss ${mib(mem.rss)}, heap ${mib(mem.heapUsed)}, heap growth since agent start ${mib(mem.heapUsed - heap0)} (${Math.round((mem.heapUsed - heap0) / expected)} B per HiveData)`,
    );
  } finally {
    await c.stop();
    await hive.stop();
  }
}

async function manyNodes(): Promise<void> {
  const nodeCount = 100;
  const podCount = Math.max(nodeCount, Math.round(5000 * scale));
  const hive = await startHiveApi();
  const c = await Cluster.start(hive);
  try {
    const perNode = Math.floor(podCount / nodeCount);
    const names = Array.from({ length: nodeCount }, (_, i) => `node-${String(i).padStart(3, "0")}`);
    await createNodes(c.api.cp.adminKubeConfig().makeApiClient(CoreV1Api), names, () => KERNEL);
    for (const n of names) await seedPods(c, n, perNode, `${n}-pod`, { "etc/shadow": "x\n" });
    global.gc?.();
    const heap0 = process.memoryUsage().heapUsed;
    for (const n of names)
      await c.addNode(n, KERNEL, {
        loader: false,
        pods: false,
        // The agent's default lease: the tests' short ones flap under benchmark load.
        lease: DEFAULT_LEASE,
      });
    await until(() => c.nodes.every((n) => n.agent.ready()), 300_000, "all discover controllers synced");
    const heapIdle = process.memoryUsage().heapUsed;
    c.api.resetRequests();
    const expected = perNode * nodeCount;
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    await c.createPolicy("shadow", [{ path: "/etc/shadow" }]);
    const tData = await until(() => dataCreated(c.api.requests) >= expected, 600_000, "all HiveData");
    const cpu = process.cpuUsage(cpu0);
    const mem = process.memoryUsage();
    const stored = await storedData(c);
    if (stored !== expected) throw new Error(`the server holds ${stored} HiveData, not ${expected}`);
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
    console.log(
      `   CPU used meanwhile in this process (${nodeCount} agents and their clients; the server apart): ${cpuText(cpu)}`,
    );
    console.log(`   API requests per node by verb (after the policy): ${JSON.stringify(summary)}`);
    console.log(
      `   open watches through the proxy: ${c.api.watchCount()} (3 per node: policies, own pods, own HiveData)`,
    );
    console.log(
      `   memory: rss ${mib(mem.rss)}; heap of ${nodeCount} idle agents ${mib(heapIdle - heap0)} (${mib((heapIdle - heap0) / nodeCount)} each); heap at end ${mib(mem.heapUsed)}`,
    );
  } finally {
    await c.stop();
    await hive.stop();
  }
}

function procStatusKiB(pid: number, field: "VmRSS" | "VmHWM"): number {
  const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return Number(m?.[1] ?? 0);
}

/**
 * 3. The agent as `hive agent` runs it, in its own process, so its memory is its own: the
 * containers are a procfs-shaped tree (`--proc-root`: <pid>/cgroup names the container,
 * <pid>/root holds its files), found by the cgroup scan; no kernel (--no-loader).
 */
async function agentProcess(forceGc: boolean): Promise<void> {
  const pods = Math.max(1, Math.round(110 * scale));
  const trapCount = 20;
  const hive: HiveApi = await startHiveApi();
  const api = hive.api;
  const base = mkdtempSync(join(tmpdir(), "hive-bench-proc-"));
  const proc = join(base, "proc");
  try {
    const kc = api.cp.adminKubeConfig();
    const core = kc.makeApiClient(CoreV1Api);
    await createNodes(core, ["node-1"], () => "00000000-0000-4000-8000-00000000be0c");
    const ids: string[] = [];
    for (let i = 0; i < pods; i++) {
      const id = `c${String(i).padStart(8, "0")}`;
      const pid = 10_000 + i;
      mkdirSync(join(proc, String(pid), "root", "etc"), { recursive: true });
      writeFileSync(join(proc, String(pid), "cgroup"), `0::/kubepods.slice/cri-containerd-${id}.scope\n`);
      for (let t = 0; t < trapCount; t++)
        writeFileSync(join(proc, String(pid), "root", "etc", `trap-${t}`), "x");
      ids.push(id);
    }
    await createRunningPods(
      core,
      ids.map((_, i) => ({
        metadata: { name: `pod-${i}`, namespace: "default" },
        spec: { nodeName: "node-1", containers: [{ name: "app", image: "busybox" }] },
      })),
      (_created, i) => ({
        phase: "Running",
        podIP: `10.9.${i >> 8}.${i & 255}`,
        containerStatuses: [
          {
            name: "app",
            image: "busybox",
            imageID: "",
            ready: true,
            restartCount: 0,
            containerID: `containerd://${ids[i]}`,
            state: { running: {} },
          },
        ],
      }),
      8,
    );
    const child = await spawnAgentProcess(
      hive,
      { node: "node-1", pod: "agent-1" },
      ["--runtime-socket", "", "--proc-root", proc],
      { forceGc, dir: base },
    );
    let log = "";
    child.stderr?.on("data", (b: Buffer) => {
      log = (log + b.toString()).slice(-20_000);
    });
    const pid = child.pid ?? 0;
    await until(() => log.includes('"msg":"agent started"'), 60_000, "agent process started");
    const url = /"metrics":"(http:[^"]+)"/.exec(log)?.[1];
    const readyDeadline = Date.now() + 60_000;
    while ((await fetch(`${url}/readyz`)).status !== 200) {
      if (Date.now() > readyDeadline) throw new Error("agent process not ready");
      await new Promise((r) => setTimeout(r, 20));
    }
    const idleRss = procStatusKiB(pid, "VmRSS");
    api.resetRequests();
    const expected = pods * trapCount;
    const t0 = performance.now();
    await kc.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: "hive-system",
      plural: PLURAL_POLICY,
      body: {
        apiVersion: "hive-operator.com/v1alpha1",
        kind: "HivePolicy",
        metadata: { name: "bench" },
        spec: { traps: Array.from({ length: trapCount }, (_, t) => ({ path: `/etc/trap-${t}` })) },
      },
    });
    const tData = await until(
      () => dataCreated(api.requests, "node-1") >= expected,
      300_000,
      "all HiveData (agent process)",
    );
    await new Promise((r) => setTimeout(r, 1000)); // status writes settle
    const scrape = await (await fetch(`${url}/metrics`)).text();
    const heapUsed = Number(/^nodejs_heap_size_used_bytes (\S+)/m.exec(scrape)?.[1] ?? Number.NaN);
    const rss = procStatusKiB(pid, "VmRSS");
    const peak = procStatusKiB(pid, "VmHWM");
    const verbs: Record<string, number> = {};
    for (const r of api.requests)
      if (r.node === "node-1") verbs[`${r.verb} ${r.resource}`] = (verbs[`${r.verb} ${r.resource}`] ?? 0) + 1;
    const exited = new Promise((r) => child.once("exit", r));
    child.kill("SIGTERM");
    await exited;
    console.log(
      `3${forceGc ? "b" : "a"}. the agent as its own process (discover + pods roles)${forceGc ? ", garbage collected every 250 ms (live heap)" : ""}, ${pods} pods × ${trapCount} traps = ${expected} HiveData`,
    );
    console.log(`   policy created → all HiveData written: ${((tData - t0) / 1000).toFixed(2)} s`);
    console.log(
      `   agent RSS: ${(idleRss / 1024).toFixed(1)} MiB ready and idle, ${(rss / 1024).toFixed(1)} MiB after, peak ${(peak / 1024).toFixed(1)} MiB; JS heap in use after: ${mib(heapUsed)} (its /metrics)`,
    );
    console.log(`   API requests of the agent by verb and resource: ${JSON.stringify(verbs)}`);
  } finally {
    await hive.stop();
    rmSync(base, { recursive: true, force: true });
  }
}

/** HIVE_BENCH_ONLY=1,3a runs only the named sections (all by default). */
const only = (process.env.HIVE_BENCH_ONLY ?? "").split(",").filter((s) => s !== "");
const sections: [string, () => Promise<void>][] = [
  ["1", singleNode],
  ["2", manyNodes],
  ["3a", () => agentProcess(false)],
  ["3b", () => agentProcess(true)],
  ["4", podsRoleMemory],
  ["5", idleRequests],
  ["6", startAtOnce],
];

export async function run(): Promise<void> {
  console.log(
    `(scale ${scale}; reproduce: npm run bench -- controllers, or HIVE_BENCH_SCALE=${scale} node --expose-gc bench/controllers.ts)`,
  );
  console.log(`machine: ${loadText()} (wall times stretch on a shared machine; CPU seconds do not)`);
  // A section that fails is reported and the others still run; the part fails at the end.
  const failed: string[] = [];
  for (const [name, section] of sections) {
    if (only.length > 0 && !only.includes(name)) continue;
    try {
      await section();
    } catch (error) {
      failed.push(name);
      console.log(`${name}. FAILED: ${(error as Error)?.stack ?? error}`);
    }
  }
  console.log(`machine after: ${loadText()}`);
  if (failed.length > 0) throw new Error(`controllers bench sections failed: ${failed.join(", ")}`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  await run();
  process.exit(0);
}
