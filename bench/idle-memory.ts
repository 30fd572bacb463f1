/**
 * Idle memory bench: the agent as the image runs it (test/image/image-guest.ts: the image under
 * containerd + runc with the DaemonSet's container spec, on a stock kernel under QEMU, against a
 * real kube-apiserver), idle after its first alert. Prints its resident set against the aim
 * (at most 120 MiB) and the DaemonSet's default request, and what the memory is: the node
 * binary's pages, the kernel's ring buffer, anonymous mappings (V8's heap, stacks), malloc.
 *
 *   npm run bench -- idle-memory         (HIVE_BENCH_KERNEL=6.1|5.10 for another kernel; default 6.12)
 *
 * Fails the bench run when the resident set is above the aim. About four minutes, most of it
 * the image build (cached) and the guest's boot.
 */
import { DEFAULT_RESOURCES } from "../component/config/defaults.ts";
import { guestApiUnavailable } from "../test/cluster/guest-api.ts";
import { prepareAgentRootfs, runImageGuest } from "../test/image/image-guest.ts";
import { findKernels, vmUnavailable } from "../test/kernel/vm.ts";

/** The aim for the idle agent's resident set, MiB. */
const AIM_MIB = 120;

export async function run(): Promise<void> {
  const reason = vmUnavailable() ?? guestApiUnavailable();
  if (reason) throw new Error(`idle-memory bench cannot run: ${reason}`);
  const series = process.env.HIVE_BENCH_KERNEL ?? "6.12";
  const kernel = findKernels().found.find((k) => k.series === series);
  if (!kernel) throw new Error(`kernel ${series} not available (sh test/kernel/fetch-kernels.sh)`);
  const outcome = await runImageGuest(kernel, prepareAgentRootfs(), { lifecycle: false });
  const m = outcome.result?.memory;
  if (!m) {
    const why = outcome.failure ?? outcome.result?.error ?? outcome.boot?.output.slice(-3000);
    throw new Error(`the guest read no memory figures: ${String(why)}`);
  }
  const request = String(DEFAULT_RESOURCES.requests?.memory);
  const part = (name: string) => m.mappings[name] ?? 0;
  console.log(`Linux ${series}, the image under containerd, idle after its first alert:`);
  console.log(`  resident set       ${m.rssMiB} MiB (aim ≤ ${AIM_MIB}; the DaemonSet requests ${request})`);
  console.log(`  the node binary    ${part("node")} MiB (file-backed, shared with any other node process)`);
  console.log(
    `  the ring buffer    ${part("anon_inode:bpf-map")} MiB (the kernel's hive_events, mapped once)`,
  );
  console.log(
    `  anonymous          ${part("[anon]")} MiB (V8's heap: ${m.heapUsedMiB} used of ${m.heapTotalMiB}; stacks; Buffers)`,
  );
  console.log(`  malloc ([heap])    ${part("[heap]")} MiB; ${m.threads} threads`);
  if (m.rssMiB > AIM_MIB)
    throw new Error(`the idle agent's resident set ${m.rssMiB} MiB is above the aim of ${AIM_MIB}`);
  console.log(`  aim met: ${(m.rssMiB / AIM_MIB).toFixed(2)} of it`);
}

if (import.meta.url === `file://${process.argv[1]}`) await run();
