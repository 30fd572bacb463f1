/** The kernel's per-CPU counters (struct hive_counters), summed over CPUs. */
import { COUNTERS_LAYOUT } from "./layout.ts";
import { errnoError, libbpf } from "./libbpf-ffi.ts";

export function readCounters(
  fd: number,
  ncpus: number,
): {
  events: bigint;
  lost: bigint;
  checks: bigint;
  bursts: bigint;
  unfolded: bigint;
  held: bigint;
  floodFull: bigint;
  quiet: bigint;
  denied: bigint;
  allowed: bigint;
} {
  const lib = libbpf();
  const buf = Buffer.alloc(ncpus * COUNTERS_LAYOUT.size);
  const rc = lib.bpf_map_lookup_elem(fd, Buffer.alloc(4), buf) as number;
  if (rc < 0) throw errnoError(-rc, "reading the counters", { object: "hive_counters" });
  const sum = (field: number) => {
    let total = 0n;
    for (let cpu = 0; cpu < ncpus; cpu++) total += buf.readBigUInt64LE(cpu * COUNTERS_LAYOUT.size + field);
    return total;
  };
  return {
    events: sum(COUNTERS_LAYOUT.events),
    lost: sum(COUNTERS_LAYOUT.lost),
    checks: sum(COUNTERS_LAYOUT.checks),
    bursts: sum(COUNTERS_LAYOUT.bursts),
    unfolded: sum(COUNTERS_LAYOUT.unfolded),
    held: sum(COUNTERS_LAYOUT.held),
    floodFull: sum(COUNTERS_LAYOUT.flood_full),
    quiet: sum(COUNTERS_LAYOUT.quiet),
    denied: sum(COUNTERS_LAYOUT.denied),
    allowed: sum(COUNTERS_LAYOUT.allowed),
  };
}
