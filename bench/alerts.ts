/**
 * Alert benchmark: decoded kernel event → alert → delivered to a local HTTP receiver.
 *
 *   npm run bench -- alerts        (or: node bench/alerts.ts)
 *
 * The receiver runs in a child process (its own core) and stamps each request with
 * CLOCK_MONOTONIC, the clock kernel events carry, so event-to-receipt latency is measured
 * across processes without clock skew. Figures:
 *   1. build: alerts built and serialised per CPU-second (no delivery).
 *   2. throughput: events → delivered alerts per second, and per CPU-second of the agent
 *      process (= per core), spool on.
 *   3. latency: p50/p99 event → receipt at a steady rate.
 *   4. burst: one million events as fast as they come, memory (peak RSS / heap) sampled,
 *      with the default per-trap rate limit and with rate limiting off (spool bound applies).
 *   5. spool: append throughput (records/s, MB/s) of the durable spool alone.
 * Sizes can be reduced with HIVE_BENCH_SCALE=0.1 for a quick look.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { LABEL_TRAP_ID } from "../api/meta.ts";
import type { AlertSource } from "../runtime/alerts/alert-source.ts";
import { createBootClock } from "../runtime/alerts/boot-clock.ts";
import { buildAlert } from "../runtime/alerts/build-alert.ts";
import { type AlertPipelineConfig, createAlertPipeline } from "../runtime/alerts/pipeline.ts";
import { openSpool } from "../runtime/alerts/spool/spool.ts";
import type { KernelEvent } from "../runtime/kernel/contract.ts";
import { createLogger } from "../runtime/log.ts";
import { createHiveMetrics } from "../runtime/metrics/metrics.ts";
import { counterValue, KERNEL_ID, makeEvent } from "../test/alerts/fixtures.ts";

const SCALE = Number(process.env.HIVE_BENCH_SCALE ?? "1");
const n = (count: number) => Math.max(1000, Math.round(count * SCALE));

// The receiver: answers 200 at once, remembers CLOCK_MONOTONIC receipt times by alert id.
const RECEIVER = `
const http = require("node:http");
let count = 0; const seen = new Set(); const at = new Map(); let track = false;
const server = http.createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    const id = req.headers["hive-alert-id"]; count++; seen.add(id);
    if (track) at.set(id, process.hrtime.bigint().toString());
    res.writeHead(200, { "content-length": "0" }); res.end();
  });
});
server.keepAliveTimeout = 60000;
server.listen(0, "127.0.0.1", () => process.send({ port: server.address().port }));
process.on("message", (m) => {
  if (m.cmd === "reset") { count = 0; seen.clear(); at.clear(); track = !!m.track; process.send({ ok: true }); }
  if (m.cmd === "report") process.send({ count, distinct: seen.size, at: m.withTimes ? Object.fromEntries(at) : undefined });
  if (m.cmd === "exit") process.exit(0);
});
`;

interface ReceiverReport {
  count: number;
  distinct: number;
  at?: Record<string, string>;
}

class ReceiverProcess {
  readonly child: ChildProcess;
  url = "";
  private constructor(child: ChildProcess) {
    this.child = child;
  }
  static async start(): Promise<ReceiverProcess> {
    const child = spawn(process.execPath, ["-e", RECEIVER], {
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    const r = new ReceiverProcess(child);
    const { port } = (await r.next()) as { port: number };
    r.url = `http://127.0.0.1:${port}/alerts`;
    return r;
  }
  next(): Promise<unknown> {
    return new Promise((resolve) => this.child.once("message", resolve));
  }
  async call(msg: object): Promise<unknown> {
    const reply = this.next();
    this.child.send(msg);
    return reply;
  }
  reset(track = false) {
    return this.call({ cmd: "reset", track });
  }
  report(withTimes = false) {
    return this.call({ cmd: "report", withTimes }) as Promise<ReceiverReport>;
  }
  stop() {
    this.child.send({ cmd: "exit" });
  }
}

const TRAPS = 8;
function sources(url: string): AlertSource[] {
  return Array.from({ length: TRAPS }, (_, i) => ({
    annotations: {
      hive_policy_name: "bench-policy",
      path: "/etc/shadow",
      pod_name: `bench-pod-${i}`,
      namespace: "default",
      container_id: `containerd://${"ab".repeat(32)}`,
      container_name: "app",
      node_name: "bench-node",
      pod_ip: "10.0.0.7",
    },
    callback: url,
    labels: { [LABEL_TRAP_ID]: `trap-${i}` },
    policyNamespace: "security",
    nodeName: "bench-node",
    kernelId: KERNEL_ID,
  }));
}

// One process (pid 4242) reading the trapped file; each event on the next trap in turn.
const event = (i: number): KernelEvent => makeEvent(0, { slot: i % TRAPS, pid: 4242, tgid: 4242 });

// Errors only; "spool full" is the expected outcome of the unlimited burst and is counted
// in its figures instead of printed a hundred times.
const quiet = createLogger(
  {},
  {
    level: "error",
    sink: (line) => {
      if (!line.includes('"SpoolFull"')) process.stderr.write(`${line}\n`);
    },
  },
);
const mb = (bytes: number) => (bytes / 1024 / 1024).toFixed(1);
const cpuSeconds = (since: NodeJS.CpuUsage) => {
  const u = process.cpuUsage(since);
  return (u.user + u.system) / 1e6;
};
const yieldLoop = () => new Promise((r) => setImmediate(r));

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}

async function pipelineFor(extra: Partial<AlertPipelineConfig>, spoolDir: string) {
  return createAlertPipeline({
    logger: quiet,
    metrics: createHiveMetrics({ processMetrics: false }),
    lines: false,
    rateLimit: false,
    spool: { dir: spoolDir },
    delivery: { concurrency: 8 },
    ...extra,
  });
}

function benchBuild(): void {
  const clock = createBootClock();
  const src = sources("http://127.0.0.1:9/")[0] as AlertSource;
  const context = { clock };
  const count = n(200_000);
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  let bytes = 0;
  for (let i = 0; i < count; i++) bytes += JSON.stringify(buildAlert(event(i), src, context)).length;
  const secs = (performance.now() - t0) / 1000;
  console.log(
    `build:      ${Math.round(count / secs).toLocaleString("en")} alerts/s built+serialised (${Math.round(count / cpuSeconds(cpu)).toLocaleString("en")} per CPU-s), ${Math.round(bytes / count)} bytes each`,
  );
}

async function benchThroughput(receiver: ReceiverProcess, dir: string): Promise<void> {
  await receiver.reset();
  const pipeline = await pipelineFor({}, dir);
  const srcs = sources(receiver.url);
  const count = n(100_000);
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  // Feed in slices so delivery runs alongside, as ring-buffer polling would.
  for (let i = 0; i < count; i++) {
    pipeline.handle(event(i), srcs[i % TRAPS] as AlertSource);
    if (i % 500 === 499) {
      while (pipeline.pending() > 20_000) await new Promise((r) => setTimeout(r, 1));
      await yieldLoop();
    }
  }
  const drained = await pipeline.drain(300_000);
  const secs = (performance.now() - t0) / 1000;
  const cpuS = cpuSeconds(cpu);
  await pipeline.close();
  const report = await receiver.report();
  console.log(
    `throughput: ${count.toLocaleString("en")} events → ${report.distinct.toLocaleString("en")} delivered in ${secs.toFixed(2)} s: ` +
      `${Math.round(report.distinct / secs).toLocaleString("en")} alerts/s, ${Math.round(report.distinct / cpuS).toLocaleString("en")} per CPU-second of the agent (spool on, 8 traps, 8 connections)${drained ? "" : " — NOT DRAINED"}`,
  );
}

async function benchLatency(receiver: ReceiverProcess, dir: string): Promise<void> {
  await receiver.reset(true);
  const pipeline = await pipelineFor({}, dir);
  const srcs = sources(receiver.url);
  const rate = 1_000; // events per second: below saturation, so this is latency, not queueing
  const seconds = Math.max(1, Math.round(3 * Math.min(1, SCALE * 2)));
  const sent = new Map<string, bigint>();
  const start = performance.now();
  let i = 0;
  while (performance.now() - start < seconds * 1000) {
    const due = Math.floor(((performance.now() - start) / 1000) * rate);
    for (; i < due; i++) {
      const ev = event(i);
      const alert = pipeline.handle(ev, srcs[i % TRAPS] as AlertSource);
      if (alert) sent.set(alert.id, ev.ktimeNs);
    }
    await new Promise((r) => setTimeout(r, 1));
  }
  await pipeline.drain(60_000);
  await pipeline.close();
  const report = await receiver.report(true);
  const lat: number[] = [];
  for (const [id, t] of Object.entries(report.at ?? {})) {
    const s = sent.get(id);
    if (s !== undefined) lat.push(Number(BigInt(t) - s) / 1e6);
  }
  lat.sort((a, b) => a - b);
  console.log(
    `latency:    event → receipt at ${rate.toLocaleString("en")} events/s for ${seconds} s (${lat.length} alerts): ` +
      `p50 ${percentile(lat, 50).toFixed(2)} ms, p99 ${percentile(lat, 99).toFixed(2)} ms, max ${(lat.at(-1) ?? Number.NaN).toFixed(2)} ms`,
  );
}

interface BurstFigures {
  count: number;
  handledS: number;
  totalS: number;
  cpuS: number;
  suppressed: number;
  dropped: number;
  baseRss: number;
  peakRss: number;
  peakHeap: number;
}

/** Runs in a fresh child process (see the end of this file), so its memory figures are its own. */
async function burstChild(url: string, dir: string, rateLimited: boolean): Promise<BurstFigures> {
  const metrics = createHiveMetrics({ processMetrics: false });
  const pipeline = await pipelineFor({ metrics, ...(rateLimited ? { rateLimit: {} } : {}) }, dir);
  const srcs = sources(url);
  const count = n(1_000_000);
  const base = process.memoryUsage();
  let peakRss = base.rss;
  let peakHeap = base.heapUsed;
  const sample = setInterval(() => {
    const m = process.memoryUsage();
    peakRss = Math.max(peakRss, m.rss);
    peakHeap = Math.max(peakHeap, m.heapUsed);
  }, 50);
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < count; i++) {
    pipeline.handle(event(i), srcs[i % TRAPS] as AlertSource);
    if (i % 2000 === 1999) await yieldLoop();
  }
  const produced = performance.now();
  await pipeline.drain(600_000);
  const totalS = (performance.now() - t0) / 1000;
  const cpuS = cpuSeconds(cpu);
  clearInterval(sample);
  await pipeline.close();
  return {
    count,
    handledS: (produced - t0) / 1000,
    totalS,
    cpuS,
    suppressed: await counterValue(metrics.alertsSuppressed),
    dropped: await counterValue(metrics.alertsDropped),
    baseRss: base.rss,
    peakRss,
    peakHeap,
  };
}

async function benchBurst(receiver: ReceiverProcess, dir: string, rateLimited: boolean): Promise<void> {
  await receiver.reset();
  const child = spawn(
    process.execPath,
    [
      fileURLToPath(import.meta.url),
      "--burst-child",
      receiver.url,
      dir,
      rateLimited ? "limited" : "unlimited",
    ],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  let out = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    out += chunk.toString("utf8");
  });
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  if (code !== 0) throw new Error(`burst child exited with ${code}`);
  const f = JSON.parse(out.trim().split("\n").at(-1) as string) as BurstFigures;
  const report = await receiver.report();
  console.log(
    `burst:      ${f.count.toLocaleString("en")} events, ${rateLimited ? "default rate limit (100/s, burst 200 per trap)" : "no rate limit, 64 MiB spool"}: ` +
      `handled in ${f.handledS.toFixed(1)} s, all delivered or dropped after ${f.totalS.toFixed(1)} s (${f.cpuS.toFixed(1)} CPU-s); ` +
      `delivered ${report.distinct.toLocaleString("en")}, suppressed ${f.suppressed.toLocaleString("en")}, dropped (spool bound) ${f.dropped.toLocaleString("en")}; ` +
      `fresh process: RSS ${mb(f.baseRss)} → peak ${mb(f.peakRss)} MiB, peak heap ${mb(f.peakHeap)} MiB`,
  );
}

function benchSpool(dir: string): void {
  const spool = openSpool({ dir, logger: quiet, maxBytes: 1024 * 1024 * 1024 });
  const clock = createBootClock();
  const body = JSON.stringify(buildAlert(event(1), sources("http://x/")[0] as AlertSource, { clock }));
  const count = n(200_000);
  const t0 = performance.now();
  let bytes = 0;
  for (let i = 0; i < count; i++) {
    const r = spool.append({
      id: `id-${i}`,
      url: "http://127.0.0.1:9/alerts",
      trapId: "trap-0",
      createdMs: 0,
      body,
    });
    bytes += "bytes" in r ? r.bytes : 0;
    if (i % 1000 === 999) spool.flush();
  }
  spool.flush();
  const secs = (performance.now() - t0) / 1000;
  spool.close();
  console.log(
    `spool:      ${Math.round(count / secs).toLocaleString("en")} records/s appended, ${(bytes / 1024 / 1024 / secs).toFixed(0)} MiB/s (${Math.round(bytes / count)} bytes/record, fdatasync every 1000 records)`,
  );
}

export async function run(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "hive-bench-alerts-"));
  const receiver = await ReceiverProcess.start();
  try {
    console.log(`Node ${process.version}, scale ${SCALE}; receiver in a child process on 127.0.0.1`);
    benchBuild();
    await benchThroughput(receiver, join(dir, "t"));
    await benchLatency(receiver, join(dir, "l"));
    await benchBurst(receiver, join(dir, "b1"), true);
    await benchBurst(receiver, join(dir, "b2"), false);
    benchSpool(join(dir, "s"));
  } finally {
    receiver.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const i = process.argv.indexOf("--burst-child");
  if (i >= 0) {
    const [url, dir, mode] = process.argv.slice(i + 1);
    const figures = await burstChild(url as string, dir as string, mode === "limited");
    process.stdout.write(`${JSON.stringify(figures)}\n`);
  } else {
    await run();
  }
}
