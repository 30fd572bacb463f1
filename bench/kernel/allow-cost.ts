/**
 * What an allowed access costs in user space, per event: the raw kernel record read in place
 * as the ring consumer reads it (runtime/kernel/event-decode.ts eventAt), its flood annotation
 * (flood-summaries.ts), then the real alert pipeline's handle() with a trap whose allow list
 * matches — the allow match and its counting (the metric and the counts `hive status` shows),
 * nothing delivered. The kernel benchmark runs it on the host
 * (ns/event) and inside its icount guest (guest instructions/event, the unit of the kernel
 * figures it is compared with).
 */
import { LABEL_TRAP_ID } from "../../api/meta.ts";
import type { AllowEntry } from "../../api/policy.ts";
import type { AlertSource } from "../../runtime/alerts/alert-source.ts";
import { createAlertPipeline } from "../../runtime/alerts/pipeline.ts";
import { eventAt } from "../../runtime/kernel/event-decode.ts";
import { recordBatch } from "../../runtime/kernel/event-record.ts";
import { FloodSummaries } from "../../runtime/kernel/flood-summaries.ts";
import { EVENT_LAYOUT, EXE_MAX } from "../../runtime/kernel/layout.ts";
import { createLogger } from "../../runtime/log.ts";
import { createHiveMetrics } from "../../runtime/metrics/metrics.ts";

/** The issue's /etc/shadow example: the access below matches its second entry. */
export const BENCH_ALLOW: AllowEntry[] = [
  { exe: "/usr/sbin/sshd" },
  { exe: "/usr/sbin/unix_chkpwd" },
  { exe: "/usr/bin/passwd", accesses: ["read", "write"] },
  { "parent-exe": "/usr/sbin/cron" },
];

/** A trap on /etc/shadow with `allow`, as the loader's index would hold it. */
export function allowSource(allow: readonly AllowEntry[]): AlertSource {
  return {
    annotations: {
      hive_policy_name: "bench-policy",
      path: "/etc/shadow",
      pod_name: "bench-pod",
      namespace: "default",
      container_id: `containerd://${"ab".repeat(32)}`,
      container_name: "app",
      node_name: "bench-node",
    },
    labels: { [LABEL_TRAP_ID]: "trap-0" },
    allow,
    // What discover found at the exact paths in the container: unix_chkpwd is the event's file.
    allowFiles: new Map([["/usr/sbin/unix_chkpwd", [{ major: 0, minor: OVERLAY_MINOR, ino: CHKPWD_INO }]]]),
    policyNamespace: "security",
    nodeName: "bench-node",
    kernelId: "00000000-0000-0000-0000-000000000000",
  };
}

/** Records per batch in the measured loop. */
const BATCH = 64;

/** The container's overlay (device 0:OVERLAY_MINOR) and the image's unix_chkpwd in it. */
const OVERLAY_MINOR = 52;
const CHKPWD_INO = 2_252_824n;

/** One struct hive_event as the kernel writes it: unix_chkpwd (child of sshd) opening and reading. */
export function rawAllowedEvent(): Buffer {
  const L = EVENT_LAYOUT;
  const buf = Buffer.alloc(L.size);
  const EXEC = 0x1 | 0x1000; // HIVE_EXE_EXEC | HIVE_EXE_IMAGE: run from the image's layer
  buf.writeBigUInt64LE(123_456_789n, L.ktime_ns);
  buf.writeBigUInt64LE(123_456_999n, L.last_ns);
  buf.writeBigUInt64LE(4242n, L.ino);
  buf.writeUInt32LE((8 << 20) | 1, L.dev);
  buf.writeUInt32LE(0x24, L.mask); // MAY_OPEN | MAY_READ
  buf.writeUInt32LE(5001, L.pid);
  buf.writeUInt32LE(5001, L.tgid);
  buf.writeUInt32LE(0, L.uid);
  buf.writeUInt32LE(0, L.gid);
  buf.writeUInt32LE(0, L.slot);
  buf.writeUInt32LE(3, L.count);
  buf.write("unix_chkpwd", L.comm);
  buf.writeBigUInt64LE(123_000_000n, L.exec_ns);
  buf.writeUInt32LE(5000, L.ppid);
  buf.writeUInt32LE(57, L.ns_pid);
  buf.writeUInt32LE(EXEC, L.exe_flags);
  buf.writeUInt32LE(EXEC, L.parent_flags);
  buf.write("sshd", L.parent_comm);
  buf.write("/usr/sbin/unix_chkpwd", L.exe, EXE_MAX);
  buf.write("/usr/sbin/sshd", L.parent_exe, EXE_MAX);
  buf.writeUInt32LE(1, L.grandparent_pid);
  buf.writeBigUInt64LE(CHKPWD_INO, L.exe_ino);
  buf.writeUInt32LE(OVERLAY_MINOR, L.exe_dev);
  buf.writeUInt32LE(OVERLAY_MINOR, L.root_dev);
  buf.writeBigUInt64LE(CHKPWD_INO + 1n, L.parent_exe_ino);
  buf.writeUInt32LE(OVERLAY_MINOR, L.parent_exe_dev);
  return buf;
}

export interface AllowCost {
  /** eventAt alone (the numbers read; strings when asked), per event. */
  decodeNs: number;
  /** eventAt + its flood annotation + pipeline.handle (allow match + counting), per event. */
  totalNs: number;
  events: number;
}

/**
 * Best of five rounds of `count` events, after a warm-up round (the JIT's). Clock:
 * process.hrtime (CLOCK_MONOTONIC), so in the icount guest the figures are instructions.
 * Throws if an event is not allowed: the figure would then measure something else.
 */
export async function measureAllowCost(count: number): Promise<AllowCost> {
  const logger = createLogger({}, { level: "error" });
  const pipeline = await createAlertPipeline({
    logger,
    metrics: createHiveMetrics({ processMetrics: false }),
    lines: false,
  });
  const source = allowSource(BENCH_ALLOW);
  // A batch as the ring reader posts it: records of two trapped files (slots 0 and 1), so two
  // flood keys, each event's burst its own.
  const records = Buffer.concat(
    Array.from({ length: BATCH }, (_, i) => {
      const record = rawAllowedEvent();
      record.writeUInt32LE(i % 2, EVENT_LAYOUT.slot);
      record.writeBigUInt64LE(123_456_789n + BigInt(i), EVENT_LAYOUT.ktime_ns);
      return record;
    }),
  );
  const batch = recordBatch(records);
  // Every event from the ring is annotated with its flood summary (event-delivery.ts) first.
  const flood = new FloodSummaries(-1, 1_000_000_000n);
  let handled = 0;
  const round = (handle: boolean): number => {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < count; i++) {
      const at = (i % BATCH) * EVENT_LAYOUT.size;
      const event = eventAt(batch, at);
      if (handle) {
        flood.annotate(event, batch, at);
        pipeline.handle(event, source);
      }
    }
    const ns = Number(process.hrtime.bigint() - t0) / count;
    if (handle) handled += count;
    return ns;
  };
  try {
    round(false);
    round(true);
    const best = (handle: boolean) => Math.min(...Array.from({ length: 5 }, () => round(handle)));
    const decodeNs = best(false);
    const totalNs = best(true);
    // handle() returns undefined for allowed, rate-limited and failed events alike: the
    // entry's count says every one was allowed by the expected entry.
    const allowed = pipeline.allowed().find((r) => r.entry === 1)?.count ?? 0;
    if (allowed !== handled) throw new Error(`${allowed} of ${handled} events allowed by entry 1`);
    return { decodeNs, totalNs, events: count };
  } finally {
    await pipeline.close();
  }
}
