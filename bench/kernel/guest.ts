/**
 * Runs inside the benchmark VM (bench/kernel.ts boots it with -icount shift=0, so guest
 * nanoseconds are guest instructions): syscall loops with and without the program
 * attached, the program's own run time from kernel BPF stats, and ring-buffer → decoded
 * event throughput. Writes its figures to $HIVE_BENCH_OUT as JSON.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { AttachMode, WatchEntry } from "../../runtime/kernel/contract.ts";
import { fileKeyFromStat } from "../../runtime/kernel/layout.ts";
import { libbpf } from "../../runtime/kernel/libbpf-ffi.ts";
import { type LibbpfKernelWatcher, openKernelWatcher } from "../../runtime/kernel/loader.ts";

const loop = process.env.HIVE_BENCH_LOOP ?? "";
const scale = Number(process.env.HIVE_BENCH_SCALE ?? "1");
const root = "/tmp/hive-bench";
const deep = join(root, "a/b/c/d/e/f");
mkdirSync(deep, { recursive: true });
const deepFile = join(deep, "file"); // 9 path components
writeFileSync(deepFile, "x");
const small = join(root, "small.txt");
writeFileSync(small, "small file\n");
// Watched decoys: a populated map and bitmap, none of them on the benchmarked paths.
const decoys: WatchEntry[] = [];
for (let i = 0; i < 100; i++) {
  const path = join(root, `decoy-${i}`);
  writeFileSync(path, "d");
  decoys.push({
    key: fileKeyFromStat(statSync(path)),
    slot: i,
    accesses: ["read", "write", "open"],
    kind: "file",
  });
}

const WORKLOADS = [
  { name: "access() 9-component path", args: ["access", deepFile], n: 5000 },
  { name: "stat() 9-component path", args: ["stat", deepFile], n: 5000 },
  { name: "open()+read()+close() small file", args: ["openread", small], n: 3000 },
];

function measure(args: string[], n: number): number {
  return Number(execFileSync(loop, [...args, String(Math.round(n * scale))], { encoding: "utf8" }).trim());
}

function progStats(fd: number): { runTimeNs: bigint; runCnt: bigint } {
  const info = Buffer.alloc(232);
  const len = [info.length];
  const rc = libbpf().bpf_obj_get_info_by_fd(fd, info, len) as number;
  if (rc < 0) throw new Error(`bpf_obj_get_info_by_fd: ${rc}`);
  return { runTimeNs: info.readBigUInt64LE(192), runCnt: info.readBigUInt64LE(200) };
}

const setStats = (on: boolean) => writeFileSync("/proc/sys/kernel/bpf_stats_enabled", on ? "1" : "0");

const results: Record<string, unknown> = {
  kernel: execFileSync("uname", ["-r"], { encoding: "utf8" }).trim(),
};
const costs: Record<string, Record<string, number>> = {};
const perRun: Record<string, Record<string, { instrPerRun: number; runsPerCall: number }>> = {};

for (const mode of ["none", "kprobe", "fentry"] as const) {
  let watcher: LibbpfKernelWatcher | null = null;
  if (mode !== "none") {
    watcher = openKernelWatcher({ attachMode: mode as AttachMode, pinRoot: null });
    watcher.sync(decoys);
    await watcher.whenReady();
  }
  // Let worker start-up (module loading, JIT, GC) finish: it shares the one vCPU.
  await new Promise((resolve) => setTimeout(resolve, 1000));
  costs[mode] = {};
  for (const w of WORKLOADS) {
    measure(w.args, w.n / 10); // warm caches
    // Best of three: background wake-ups only ever add instructions.
    (costs[mode] as Record<string, number>)[w.name] = Math.min(
      measure(w.args, w.n),
      measure(w.args, w.n),
      measure(w.args, w.n),
    );
  }
  if (watcher) {
    perRun[mode] = {};
    setStats(true);
    for (const w of WORKLOADS) {
      const before = progStats(watcher.programFd);
      const n = Math.round(w.n * scale);
      measure(w.args, w.n);
      const after = progStats(watcher.programFd);
      const runs = after.runCnt - before.runCnt;
      (perRun[mode] as Record<string, unknown>)[w.name] = {
        instrPerRun: runs > 0n ? Number(after.runTimeNs - before.runTimeNs) / Number(runs) : 0,
        runsPerCall: Number(runs) / n,
      };
    }
    setStats(false);
    await watcher.close();
  }
}
results.costs = costs;
results.perRun = perRun;

// Ring buffer → decoded events: alternating opens of two watched files, one burst each.
{
  const watcher = openKernelWatcher({ pinRoot: null });
  const a = join(root, "ev-a");
  const b = join(root, "ev-b");
  writeFileSync(a, "a");
  writeFileSync(b, "b");
  watcher.sync([
    { key: fileKeyFromStat(statSync(a)), slot: 1, accesses: ["open"], kind: "file" },
    { key: fileKeyFromStat(statSync(b)), slot: 2, accesses: ["open"], kind: "file" },
  ]);
  await watcher.whenReady();
  let received = 0;
  watcher.onEvent(() => received++);
  const n = Math.round(50_000 * scale);
  const started = process.hrtime.bigint();
  execFileSync(loop, ["events", a, b, String(n)]);
  const produced = process.hrtime.bigint();
  await watcher.flush(120_000);
  const done = process.hrtime.bigint();
  const c = watcher.counters();
  results.ring = {
    events: received,
    lost: Number(c.lost),
    bursts: Number(c.bursts),
    produceSeconds: Number(produced - started) / 1e9,
    totalSeconds: Number(done - started) / 1e9,
    eventsPerSecond: Math.round(received / (Number(done - started) / 1e9)),
  };
  await watcher.close();
}

writeFileSync(process.env.HIVE_BENCH_OUT ?? "/hive-out/bench.json", JSON.stringify(results, null, 2));
process.exit(0);
