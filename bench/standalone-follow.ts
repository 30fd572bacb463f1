/**
 * How soon `hive watch` arms the traps of a container that starts after it: the time from
 * containerd's task start event (the envelope's timestamp) to the trap in the kernel map
 * (standalone logs it as `sinceTaskStartMs` on the "watching" line), over N containers:
 *
 *   npm run bench -- standalone-follow      (or: node bench/standalone-follow.ts)
 *
 *   before  standalone without the event stream (containers listed at start and on SIGHUP
 *           only): how many of N containers started later are armed at all;
 *   after   with the event stream: N containers started one after the other, then N at once
 *           (a burst, coalesced into few re-plans); p50 / p90 / max.
 * A real private containerd + runc and the real in-root resolution; the kernel map is a
 * recorder (the figures stop at the sync call, which is one map update per entry). Needs
 * root, containerd and runc. HIVE_BENCH_FOLLOW_N sets N (default 20).
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { KernelWatcher, WatchEntry } from "../runtime/kernel/contract.ts";
import { createLogger } from "../runtime/log.ts";
import { openContainerLister } from "../runtime/standalone/local-containers.ts";
import { parsePolicyText } from "../runtime/standalone/policy-files.ts";
import { startStandalone } from "../runtime/standalone/standalone.ts";
import { containersAvailable, startContainerd } from "../test/containers/containerd-harness.ts";

const N = Number(process.env.HIVE_BENCH_FOLLOW_N ?? "20");

/** The container trap, and a host trap so that the variant without events starts at all. */
const policy = (hostFile: string) => `apiVersion: hive-operator.com/v1alpha1
kind: HivePolicy
metadata:
  name: bench-follow
spec:
  traps:
    - path: /etc/shadow
      match:
        container-name: "bench-.*"
    - path: ${hostFile}
`;

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN;
}

const summary = (ms: number[]) => {
  const s = [...ms].sort((a, b) => a - b);
  return `p50 ${percentile(s, 50)} ms · p90 ${percentile(s, 90)} ms · max ${s[s.length - 1]} ms (n=${s.length})`;
};

async function until(check: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 10));
  }
  return true;
}

async function scenario(withEvents: boolean, burst: boolean, prefix: string) {
  const containerd = await startContainerd();
  const lister = await openContainerLister({ socket: containerd.socket });
  if (!lister) throw new Error("the private containerd has no socket");
  const lines: Record<string, unknown>[] = [];
  let entries: readonly WatchEntry[] = [];
  const watcher = {
    attachMode: "kprobe",
    sync: (next: readonly WatchEntry[]) => {
      entries = next;
      return { notWatched: [] };
    },
    onEvent: () => undefined,
  } as unknown as KernelWatcher;
  const hostFile = join(containerd.dir, "host-secret");
  writeFileSync(hostFile, "host\n");
  const { documents } = parsePolicyText("bench.yaml", policy(hostFile));
  const standalone = await startStandalone({
    documents,
    watcher,
    alerts: { handle: () => undefined },
    logger: createLogger({}, { level: "info", sink: (l) => lines.push(JSON.parse(l)) }),
    kernelId: "bench",
    listContainers: () => lister.list(),
    ...(withEvents ? { containerEvents: lister.events() } : {}),
  }).catch((error: Error) => error);
  try {
    if (standalone instanceof Error) {
      return { armed: 0, latencies: [] as number[], note: standalone.message };
    }
    if (withEvents) await until(() => standalone.following?.connected === true, 5000);
    const ids = Array.from({ length: N }, (_, i) => `bench-${prefix}-${i}`);
    const start = (id: string) => containerd.start(id, containerd.makeRootfs(id, { "etc/shadow": "x\n" }));
    if (burst) await Promise.all(ids.map(start));
    else for (const id of ids) await start(id);
    const armedCount = () => standalone.plan.files.filter((f) => f.target.kind === "container").length;
    await until(() => armedCount() >= N, withEvents ? 30_000 : 2000);
    const latencies = lines
      .filter((l) => l.msg === "watching" && typeof l.sinceTaskStartMs === "number")
      .map((l) => l.sinceTaskStartMs as number);
    return { armed: armedCount(), latencies, entries: entries.length, note: "" };
  } finally {
    if (!(standalone instanceof Error)) await standalone.close();
    lister.close();
    await containerd.stop();
  }
}

export async function run(): Promise<void> {
  const available = containersAvailable();
  if (!available.ok) {
    console.log(`skipped: ${available.why}`);
    return;
  }
  const before = await scenario(false, false, "before");
  console.log(
    `before (no event stream, no SIGHUP): ${before.armed} of ${N} containers started later armed${before.note ? ` — ${before.note}` : ""}`,
  );
  const one = await scenario(true, false, "seq");
  console.log(
    `after, ${N} containers one after the other: ${one.armed}/${N} armed; task start → armed ${summary(one.latencies)}`,
  );
  const all = await scenario(true, true, "burst");
  console.log(
    `after, ${N} containers at once: ${all.armed}/${N} armed; task start → armed ${summary(all.latencies)}`,
  );
}

if (import.meta.url === `file://${process.argv[1]}`) await run();
