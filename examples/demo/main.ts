/**
 * `npm run demo`: Hive's main job on one machine, in about a minute. Checks whether this
 * machine's kernel can attach Hive's program (root, BTF, kprobes); if it can, runs the
 * demo here (examples/demo/scenario.ts); if not, says why and boots a stock Debian kernel
 * under QEMU with this machine's files (the kernel test harness, test/kernel/vm.ts) and
 * runs the same demo inside it. Exit 0 when the alert reached the callback receiver.
 */
import { spawnSync } from "node:child_process";
import { isHiveError } from "../../api/errors.ts";
import { openKernelWatcher } from "../../runtime/kernel/index.ts";
import { bootVm, findKernels, vmUnavailable } from "../../test/kernel/vm.ts";

const SCENARIO = new URL("./scenario.ts", import.meta.url).pathname;
const say = (text: string) => process.stdout.write(`${text}\n`);

/** null when this kernel attaches the program; otherwise why not. */
async function whyNotHere(): Promise<string | null> {
  if (process.getuid?.() !== 0) return "not running as root (loading BPF programs needs root)";
  try {
    // The real check: load, verify and attach the program, then detach. Nothing pinned.
    const watcher = openKernelWatcher({ pinRoot: null });
    await watcher.close();
    return null;
  } catch (error) {
    return isHiveError(error) ? error.describe() : String(error);
  }
}

async function main(): Promise<number> {
  // The README on a one-node cluster (examples/demo/cluster.ts): minutes, not one.
  if (process.argv.includes("--cluster")) {
    const cluster = new URL("./cluster.ts", import.meta.url).pathname;
    return spawnSync(process.execPath, [cluster], { stdio: "inherit" }).status ?? 1;
  }
  const started = Date.now();
  const uname = spawnSync("uname", ["-r"], { encoding: "utf8" }).stdout.trim();
  say(`[demo] Hive demo: trap a file, read it from another process, receive the alert`);
  const why = await whyNotHere();
  if (why === null) {
    say(`[demo] this machine's kernel (${uname}) can attach Hive's program: running here`);
    const run = spawnSync(process.execPath, [SCENARIO], { stdio: "inherit" });
    return run.status ?? 1;
  }
  say(`[demo] this machine's kernel (${uname}) cannot run Hive's program here:`);
  say(`[demo]   ${why}`);
  const unavailable = vmUnavailable();
  const kernel = findKernels().found.find((k) => k.series === "6.1") ?? findKernels().found[0];
  if (unavailable !== null || kernel === undefined) {
    say(
      `[demo] and no QEMU fallback either: ${unavailable ?? "no stock kernel (apt-get install linux-image-amd64)"}`,
    );
    say("[demo] install what is named above (scripts/bootstrap.sh does, when run as root) and retry");
    return 1;
  }
  say(
    `[demo] booting the stock Debian kernel ${kernel.version} under QEMU with this machine's files instead`,
  );
  say("[demo] (emulated CPU: this takes a minute or two)");
  const ticker = setInterval(() => say(`[demo] … ${Math.round((Date.now() - started) / 1000)} s`), 15_000);
  try {
    const result = await bootVm({
      kernel,
      command: `${process.execPath} ${SCENARIO}`,
      env: { NODE_COMPILE_CACHE: "/tmp/hive-node-cache" },
      // A hang guard: on a busy machine the emulated guest can take several minutes.
      timeoutMs: 600_000,
    });
    clearInterval(ticker);
    process.stdout.write(result.output);
    say(`[demo] guest finished in ${Math.round(result.durationMs / 1000)} s (exit ${result.exitCode})`);
    return result.exitCode ?? 1;
  } catch (error) {
    clearInterval(ticker);
    say(`[demo] the VM failed: ${isHiveError(error) ? error.describe() : String(error)}`);
    return 1;
  }
}

process.exit(await main());
