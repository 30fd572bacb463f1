/**
 * Kernel event time → wall-clock time.
 *
 * The kernel stamps each event with bpf_ktime_get_ns(): CLOCK_MONOTONIC nanoseconds since
 * boot (suspend excluded). Node's process.hrtime.bigint() reads the same clock (libuv uses
 * CLOCK_MONOTONIC on Linux), so `wall = ktime + offset` with
 * `offset = CLOCK_REALTIME − CLOCK_MONOTONIC`, measured once when the pipeline starts.
 * The offset is sampled several times and the tightest bracket kept, so it is good to a few
 * microseconds. Computed once on purpose: alerts of one agent stay ordered even if NTP steps
 * the wall clock later; the cost is that a later step (or a suspend) shifts the alert
 * timestamps by that step until the agent restarts.
 */
export interface BootClock {
  /** RFC 3339 UTC timestamp with microseconds for a kernel ktime. */
  toIso(ktimeNs: bigint): string;
  /** Wall-clock milliseconds since the epoch for a kernel ktime. */
  toEpochMs(ktimeNs: bigint): number;
  /** Current CLOCK_MONOTONIC (the kernel's ktime scale). */
  nowKtimeNs(): bigint;
}

function measureOffsetNs(samples = 7): bigint {
  let best: { width: bigint; offset: bigint } | undefined;
  for (let i = 0; i < samples; i++) {
    const before = process.hrtime.bigint();
    // performance.timeOrigin + now() is wall-clock time with sub-millisecond resolution.
    const wallNs = BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e6));
    const after = process.hrtime.bigint();
    const width = after - before;
    const offset = wallNs - (before + after) / 2n;
    if (!best || width < best.width) best = { width, offset };
  }
  return (best as { offset: bigint }).offset;
}

export function createBootClock(offsetNs?: bigint): BootClock {
  const offset = offsetNs ?? measureOffsetNs();
  // Hot path in plain numbers: BigInt division per event is measurably slow. Wall-clock
  // microseconds since the epoch (~1.8e15) are exact in a double.
  // The base is aligned to a whole wall-clock microsecond so that one floor() below is exact.
  const now = process.hrtime.bigint();
  const baseK = now - ((((now + offset) % 1000n) + 1000n) % 1000n);
  const baseWallUs = Number((baseK + offset) / 1000n);
  const wallUs = (ktimeNs: bigint): number => baseWallUs + Math.floor(Number(ktimeNs - baseK) / 1000);
  return {
    toIso(ktimeNs) {
      const us = wallUs(ktimeNs);
      const ms = Math.floor(us / 1000);
      const micros = us - ms * 1000;
      // toISOString gives millisecond precision: append the microseconds before the "Z".
      return `${new Date(ms).toISOString().slice(0, -1)}${String(micros).padStart(3, "0")}Z`;
    },
    toEpochMs: (ktimeNs) => Math.floor(wallUs(ktimeNs) / 1000),
    nowKtimeNs: () => process.hrtime.bigint(),
  };
}
