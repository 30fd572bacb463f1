/**
 * What the agent's controllers measure: discover's trap path resolver (stuck threads and
 * timed-out walks, read at scrape time), each reconcile's duration, and the pods a policy
 * selects where no agent watches (kept by the pods role).
 */
import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import type { HiveMetrics } from "./metrics.ts";
import { type ScrapeSources, sinceLastScrape } from "./scrape-sources.ts";

export function defineResolverMetrics(registers: Registry[], sources: ScrapeSources): void {
  new Gauge({
    name: "hive_resolve_stuck_threads",
    help: "Trap path resolver threads abandoned past their deadline whose lookup has not returned yet (a FUSE or NFS mount in a container that does not answer).",
    registers,
    collect() {
      if (sources.resolver) this.set(sources.resolver().stuck);
    },
  });
  let timeoutsSeen = 0;
  new Counter({
    name: "hive_resolve_timeouts_total",
    help: "Trap path resolutions that ran past their deadline (reported as PathInvalid, timed out, and retried).",
    registers,
    collect() {
      if (!sources.resolver) return;
      const now = sources.resolver().timeouts;
      this.inc(sinceLastScrape(now, timeoutsSeen));
      timeoutsSeen = now;
    },
  });
}

export function reconcileDurationHistogram(registers: Registry[]): HiveMetrics["reconcileDuration"] {
  return new Histogram({
    name: "hive_reconcile_duration_seconds",
    help: "Duration of one reconcile, by controller.",
    labelNames: ["controller"],
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30],
    registers,
  });
}

export function podsUncoveredGauge(registers: Registry[]): HiveMetrics["podsUncovered"] {
  return new Gauge({
    name: "hive_policy_pods_uncovered",
    help: "Pods a policy's traps select that run on nodes without a ready Hive agent (their files are not watched; the policy's NodesCovered condition names them). Exported by the agent holding the pods role.",
    labelNames: ["policy_namespace", "policy"],
    registers,
  });
}
