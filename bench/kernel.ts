/**
 * Kernel benchmark: one Debian 6.1 VM run under QEMU with `-icount shift=0 -smp 1`, so
 * guest time advances one nanosecond per guest instruction and the figures are
 * deterministic instruction counts (emulated CPU: ratios matter, absolutes do not).
 *
 *   npm run bench -- kernel        (or: node bench/kernel.ts; needs root, qemu, clang)
 *
 * Figures: per-call cost of access()/stat() on a 9-component path and open()+read() of a
 * small file with no program, the kprobe program and the fentry program attached (100
 * decoy files watched, none on the path: the miss path), as ratios to no program; the
 * program's instructions per run from kernel BPF stats (kernel.bpf_stats_enabled); and
 * ring buffer → decoded events per second. HIVE_BENCH_SCALE=0.1 for a quick look;
 * HIVE_BENCH_KERNEL=6.12|5.10 for another kernel.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { bootVm, findKernels, REPO_ROOT, vmUnavailable } from "../test/kernel/vm.ts";

interface GuestResults {
  kernel: string;
  costs: Record<string, Record<string, number>>;
  perRun: Record<string, Record<string, { instrPerRun: number; runsPerCall: number }>>;
  ring: {
    events: number;
    lost: number;
    bursts: number;
    produceSeconds: number;
    totalSeconds: number;
    eventsPerSecond: number;
  };
}

function buildLoop(): string {
  const source = join(REPO_ROOT, "bench/kernel/loop.c");
  const out = join(REPO_ROOT, ".tmp/bench/kernel-loop");
  if (!existsSync(out) || statSync(out).mtimeMs < statSync(source).mtimeMs) {
    mkdirSync(join(REPO_ROOT, ".tmp/bench"), { recursive: true });
    execFileSync("clang", ["-O2", "-static", "-o", out, source]);
  }
  return out;
}

export async function run(): Promise<void> {
  const reason = vmUnavailable();
  if (reason) throw new Error(`kernel bench cannot run: ${reason}`);
  const series = process.env.HIVE_BENCH_KERNEL ?? "6.1";
  const kernel = findKernels().found.find((k) => k.series === series);
  if (!kernel) throw new Error(`kernel ${series} not available (sh test/kernel/fetch-kernels.sh)`);
  execFileSync("sh", [join(REPO_ROOT, "bpf/build.sh")]);
  const loop = buildLoop();
  const boot = await bootVm({
    kernel,
    icount: true,
    timeoutMs: 900_000,
    env: { HIVE_BENCH_LOOP: loop, HIVE_BENCH_SCALE: process.env.HIVE_BENCH_SCALE ?? "1" },
    command: `export PATH='${join(REPO_ROOT, "node_modules/.bin")}':$PATH\nnode bench/kernel/guest.ts`,
  });
  const file = join(boot.outDir, "bench.json");
  if (!existsSync(file)) throw new Error(`the guest produced no figures:\n${boot.output.slice(-3000)}`);
  const r = JSON.parse(readFileSync(file, "utf8")) as GuestResults;
  const none = r.costs.none ?? {};
  console.log(`Linux ${r.kernel} under QEMU TCG, -icount shift=0 (1 ns = 1 guest instruction)`);
  console.log(
    "\nPer-call cost, guest instructions (ratio to no program); 100 watched files, none on the path:",
  );
  const modes = ["none", "kprobe", "fentry"];
  console.log(["workload".padEnd(36), ...modes.map((m) => m.padStart(16))].join(""));
  for (const workload of Object.keys(none)) {
    const base = none[workload] ?? 1;
    const cells = modes.map((m) => {
      const v = r.costs[m]?.[workload] ?? Number.NaN;
      return `${Math.round(v)} (${(v / base).toFixed(2)})`.padStart(16);
    });
    console.log([workload.padEnd(36), ...cells].join(""));
  }
  console.log("\nProgram runs (kernel BPF stats): instructions per run, runs per call:");
  for (const mode of ["kprobe", "fentry"]) {
    for (const [workload, v] of Object.entries(r.perRun[mode] ?? {})) {
      console.log(
        `  ${mode.padEnd(7)} ${workload.padEnd(36)} ${v.instrPerRun.toFixed(0).padStart(6)} instr/run, ${v.runsPerCall.toFixed(1)} runs/call`,
      );
    }
  }
  const ring = r.ring;
  console.log(
    `\nRing buffer → decoded events: ${ring.events} events (${ring.lost} lost, ${ring.bursts} bursts) in ${ring.totalSeconds.toFixed(2)} s guest time` +
      ` (producer loop ${ring.produceSeconds.toFixed(2)} s): ${ring.eventsPerSecond} events/s`,
  );
  console.log(`(VM run: ${(boot.durationMs / 1000).toFixed(0)} s wall)`);
}

if (import.meta.url === `file://${process.argv[1]}`) await run();
