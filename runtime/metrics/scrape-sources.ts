/**
 * What Hive's metrics read at scrape time: the sources the agent's parts hand over once
 * (HiveMetrics.observeKernel and its siblings), and the step that turns a source's cumulative
 * figures into counter increments.
 */

/** Cumulative counters the kernel watcher reports (runtime/kernel/contract.ts KernelCounters). */
export type KernelCountersSource = () => {
  events: bigint;
  lost: bigint;
  watched: number;
  notWatched?: number;
  unfolded?: bigint;
  held?: bigint;
  floodFull?: bigint;
  quiet?: bigint;
  allowed?: bigint;
  programMisses?: bigint;
  upgradeDiscarded?: bigint;
  /** The running trap program's tag and attach mode (runtime/kernel/program-info.ts). */
  program?: { tag: string; attachMode: string; replacedFrom?: string };
  ringUsedBytes?: number;
  ringHeld?: boolean;
  ringPaused?: boolean;
};

/** Whether every readiness check passes (runtime/metrics/health.ts), asked at scrape time. */
export type ReadinessSource = () => Promise<boolean>;

/** Cumulative allowed accesses by trap and entry (runtime/alerts/allowed-counts.ts AllowedRecord). */
export type AllowedCountsSource = () => Iterable<{
  namespace?: string;
  policy: string;
  trapId: string;
  entry: number;
  count: number;
}>;

/** Cumulative figures of the trap path resolver threads (runtime/discover/resolve-pool.ts ResolvePoolStats). */
export type ResolverStatsSource = () => { stuck: number; timeouts: number };

/**
 * The sources handed over so far. Metrics fed from one read it at each scrape; until it is
 * handed over they keep their value (a node that never loads the kernel has no kernel source).
 */
export interface ScrapeSources {
  kernel?: KernelCountersSource;
  allowed?: AllowedCountsSource;
  resolver?: ResolverStatsSource;
  readiness?: ReadinessSource;
}

/**
 * The increment a counter takes from a cumulative figure, given the figure of the previous
 * scrape. Counters must only grow; a smaller figure means its source restarted (a new kernel
 * program, a new resolver), whose count starts from zero again.
 */
export function sinceLastScrape(now: bigint, seen: bigint): bigint;
export function sinceLastScrape(now: number, seen: number): number;
export function sinceLastScrape(now: bigint | number, seen: bigint | number): bigint | number {
  if (now < seen) return now;
  return typeof now === "bigint" ? now - (seen as bigint) : now - (seen as number);
}
