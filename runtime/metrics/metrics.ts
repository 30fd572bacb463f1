/**
 * Hive's Prometheus metrics: one registry per agent, one place that names every metric,
 * so the metrics table of docs/operations.md, the dashboards and the code cannot disagree. Parts of the agent
 * receive the `HiveMetrics` object and only increment; they never create metrics.
 *
 * Label cardinality is bounded on purpose: `destination` is a URL's origin
 * (scheme://host:port, never its path or query), `trap_id` is bounded by the traps of the
 * cluster's policies, `entry` by the 64 entries of a trap's allow list, `class`/`reason`/`result`
 * are closed sets named below.
 */
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import { type BuildInfo, buildInfo } from "../build-info.ts";

/** Why an alert was not delivered (the `reason` label of hive_alerts_dropped_total). */
export const DROP_REASONS = [
  "spool_full",
  "destination_quota",
  "spool_unwritable",
  "permanent_failure",
  "too_large",
  "spool_corrupt",
] as const;
export type DropReason = (typeof DROP_REASONS)[number];

/**
 * Why a kernel event was dropped before it became an alert (hive_kernel_events_dropped_total):
 * its file is no longer watched by this loader, it came before the first sync after a restart
 * and the hold was full, or the alert pipeline failed on it (a bug; the access is logged).
 */
export const EVENT_DROP_REASONS = [
  "unmatched",
  "hold_full",
  "pipeline_error",
  // An access to an image layer's trapped file from a container no trap applies to (expected).
  "unselected",
  // ... from a container or process this node cannot name (an access that alerts nobody: a loss).
  "unattributed",
] as const;
export type EventDropReason = (typeof EVENT_DROP_REASONS)[number];

/** How one delivery attempt failed (the `class` label of hive_alert_delivery_failures_total). */
export const FAILURE_CLASSES = [
  "refused",
  "reset",
  "connect_timeout",
  "timeout",
  "dns",
  "tls",
  "http_429",
  "http_5xx",
  "http_auth",
  "http_4xx",
  "other",
] as const;
export type FailureClass = (typeof FAILURE_CLASSES)[number];

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

export interface HiveMetrics {
  readonly registry: Registry;
  /** Alerts produced (after rate limiting), by policy and trap. */
  readonly alerts: Counter<"policy_namespace" | "policy" | "trap_id">;
  /** Alerts suppressed by the rate limit (trap × container × executable), by trap. */
  readonly alertsSuppressed: Counter<"trap_id">;
  /** Accesses that matched an entry of their trap's `allow` list (no alert), by policy, trap and entry index. */
  readonly allowedAccesses: Counter<"policy_namespace" | "policy" | "trap_id" | "entry">;
  readonly deliveryAttempts: Counter<"destination">;
  readonly deliveryFailures: Counter<"destination" | "class">;
  readonly deliveryRetries: Counter<"destination">;
  readonly alertsDelivered: Counter<"destination">;
  /** Seconds from the alert being produced to the receiver's 2xx, retries included. */
  readonly deliveryLatency: Histogram<"destination">;
  readonly alertsDropped: Counter<"reason">;
  /** Alerts waiting for delivery (in the spool, or in memory when no spool is configured). */
  readonly pendingAlerts: Gauge;
  readonly spoolBytes: Gauge;
  /** The bound of `spoolBytes`: beyond it the oldest alerts are dropped (`spool_full`). */
  readonly spoolCapacityBytes: Gauge;
  readonly spoolCorruptFiles: Counter;
  /** Failed attempts to write the spool, by reason (runtime/alerts/spool/spool-file.ts SPOOL_WRITE_ERRORS). */
  readonly spoolWriteErrors: Counter<"reason">;
  readonly watchedFiles: Gauge;
  readonly reconcileDuration: Histogram<"controller">;
  readonly kubernetesEvents: Counter<"result">;
  readonly kernelEventsDropped: Counter<"reason">;
  /** Tenant trap callbacks not contacted (outside the monitor's tenantCallbacks), by policy namespace. */
  readonly tenantCallbacksRefused: Counter<"policy_namespace">;
  /** Pods a policy's traps select on nodes without a ready agent (set by the agent holding the pods role). */
  readonly podsUncovered: Gauge<"policy_namespace" | "policy">;
  /** Feed the kernel's cumulative counters (events, ring-buffer losses, watched entries) at scrape time. */
  observeKernel(source: KernelCountersSource): void;
  /** Feed the allowed-access counts (runtime/alerts/allowed-counts.ts) at scrape time. */
  observeAllowed(source: AllowedCountsSource): void;
  /** Feed the path resolver's stuck threads and timed-out walks at scrape time. */
  observeResolver(source: ResolverStatsSource): void;
  /** Feed hive_agent_ready (what /readyz answers) at scrape time. */
  observeReadiness(source: ReadinessSource): void;
}

export interface HiveMetricsOptions {
  registry?: Registry;
  /**
   * Also export Node's process metrics (CPU, memory, event-loop lag) under their standard
   * names (`process_*`, `nodejs_*`, as stock dashboards expect them); default true.
   */
  processMetrics?: boolean;
  /** The labels of hive_build_info; default: this package and its bpf/hive.bpf.o. */
  build?: Pick<BuildInfo, "version" | "program" | "nodeVersion">;
}

export function createHiveMetrics(options: HiveMetricsOptions = {}): HiveMetrics {
  const registry = options.registry ?? new Registry();
  if (options.processMetrics ?? true) collectDefaultMetrics({ register: registry });
  const registers = [registry];

  const build = options.build ?? buildInfo();
  new Gauge({
    name: "hive_build_info",
    help: "Always 1: the package version, the compiled kernel program (SHA-256 of its object) and the Node.js version, as labels.",
    labelNames: ["version", "program", "node_version"],
    registers,
  }).set({ version: build.version, program: build.program, node_version: build.nodeVersion }, 1);

  let readinessSource: ReadinessSource | undefined;
  new Gauge({
    name: "hive_agent_ready",
    help: "1 when every readiness check of the agent passes (what /readyz answers), else 0; /readyz?verbose names the failing ones.",
    registers,
    async collect() {
      if (readinessSource) this.set((await readinessSource()) ? 1 : 0);
    },
  });

  let kernelSource: KernelCountersSource | undefined;
  let allowedSource: AllowedCountsSource | undefined;
  /** A counter fed at scrape time from one of the kernel's cumulative counters. */
  const kernelCounter = (
    name: string,
    help: string,
    pick: (c: ReturnType<KernelCountersSource>) => bigint,
  ) => {
    let seen = 0n;
    new Counter({
      name,
      help,
      registers,
      collect() {
        if (!kernelSource) return;
        const now = pick(kernelSource());
        // Counters must only grow: the kernel's cumulative values are turned into increments.
        // A smaller value means a new kernel program (counters restarted): count from zero again.
        this.inc(Number(now >= seen ? now - seen : now));
        seen = now;
      },
    });
  };
  kernelCounter(
    "hive_kernel_events_total",
    "Access events the kernel program emitted into the ring buffer.",
    (c) => c.events,
  );
  kernelCounter(
    "hive_kernel_program_misses_total",
    "Runs of Hive's kernel hooks the kernel skipped because one was already running on that CPU (fentry recursion; kprobes since Linux 6.7): permission checks never seen.",
    (c) => c.programMisses ?? 0n,
  );
  kernelCounter(
    "hive_kernel_upgrade_discarded_total",
    "Events and pending bursts an agent of another map layout left unread when this one replaced its pins (another version's layout cannot be decoded): lost, and counted.",
    (c) => c.upgradeDiscarded ?? 0n,
  );
  kernelCounter(
    "hive_kernel_events_lost_total",
    "Access events lost because the kernel ring buffer was full.",
    (c) => c.lost,
  );
  kernelCounter(
    "hive_kernel_bursts_held_total",
    "Bursts a flood key (one executable, one trapped file, one cgroup) made beyond its budget: held in the kernel and reported as counts (an alert's `summarized`) instead of one event each.",
    (c) => c.held ?? 0n,
  );
  kernelCounter(
    "hive_kernel_flood_table_full_total",
    "Bursts emitted without a flood budget because the kernel's flood table (16,384 keys) was full.",
    (c) => c.floodFull ?? 0n,
  );
  kernelCounter(
    "hive_kernel_checks_quiet_total",
    "Checks of an image layer's file by a container no trap selects, skipped in the kernel (its cgroup is in the quiet map): no burst, no event. The first access of such a container is an event, dropped as unselected.",
    (c) => c.quiet ?? 0n,
  );
  kernelCounter(
    "hive_kernel_bursts_unfolded_total",
    "Accesses reported at once, without folding their later checks, because the kernel's burst table was full.",
    (c) => c.unfolded ?? 0n,
  );
  const watchedFiles = new Gauge({
    name: "hive_watched_files",
    help: "Entries in the kernel watch map (trapped files and their parent directories).",
    registers,
    collect() {
      if (kernelSource) this.set(kernelSource().watched);
    },
  });
  /** A gauge fed at scrape time from the kernel watcher's state. */
  const kernelGauge = (name: string, help: string, pick: (c: ReturnType<KernelCountersSource>) => number) =>
    new Gauge({
      name,
      help,
      registers,
      collect() {
        if (kernelSource) this.set(pick(kernelSource()));
      },
    });
  new Gauge({
    name: "hive_kernel_program_info",
    help: "1 for the trap program the kernel runs: its tag (a hash of its instructions: another build has another), attach mode, and the tag it replaced when this agent found an earlier version running.",
    labelNames: ["tag", "attach_mode", "replaced"],
    registers,
    collect() {
      this.reset();
      const program = kernelSource?.().program;
      if (program)
        this.set(
          { tag: program.tag, attach_mode: program.attachMode, replaced: program.replacedFrom ?? "" },
          1,
        );
    },
  });
  kernelGauge(
    "hive_kernel_ring_used_bytes",
    "Bytes of the kernel ring buffer not given back to the kernel: events not read yet, or read and held until their alerts are durable.",
    (c) => c.ringUsedBytes ?? 0,
  );
  kernelGauge(
    "hive_kernel_ring_held",
    "1 while handled events keep their ring space because their alerts are neither on the spool's disk nor delivered (the spool's disk refuses writes).",
    (c) => (c.ringHeld ? 1 : 0),
  );
  kernelGauge(
    "hive_kernel_ring_paused",
    "1 while the ring buffer is not read because alerts can neither be written nor delivered and their memory is half full: events wait in the ring, and the kernel counts what it cannot take as lost.",
    (c) => (c.ringPaused ? 1 : 0),
  );
  new Gauge({
    name: "hive_unwatched_files",
    help: "Files (and parent directories) to watch that the full kernel watch map has no room for.",
    registers,
    collect() {
      if (kernelSource) this.set(kernelSource().notWatched ?? 0);
    },
  });

  let resolverSource: ResolverStatsSource | undefined;
  new Gauge({
    name: "hive_resolve_stuck_threads",
    help: "Trap path resolver threads abandoned past their deadline whose lookup has not returned yet (a FUSE or NFS mount in a container that does not answer).",
    registers,
    collect() {
      if (resolverSource) this.set(resolverSource().stuck);
    },
  });
  let timeoutsSeen = 0;
  new Counter({
    name: "hive_resolve_timeouts_total",
    help: "Trap path resolutions that ran past their deadline (reported as PathInvalid, timed out, and retried).",
    registers,
    collect() {
      if (!resolverSource) return;
      const now = resolverSource().timeouts;
      // A cumulative figure turned into increments; a smaller one is a new resolver (count from zero).
      this.inc(now >= timeoutsSeen ? now - timeoutsSeen : now);
      timeoutsSeen = now;
    },
  });

  const latencyBuckets = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300,
  ];
  return {
    registry,
    alerts: new Counter({
      name: "hive_alerts_total",
      help: "Alerts produced, by policy and trap (after rate limiting).",
      labelNames: ["policy_namespace", "policy", "trap_id"],
      registers,
    }),
    alertsSuppressed: new Counter({
      name: "hive_alerts_suppressed_total",
      help: "Alerts suppressed by the rate limit, keyed on trap × container × executable (reported as `suppressed` in that key's next alert).",
      labelNames: ["trap_id"],
      registers,
    }),
    allowedAccesses: new Counter({
      name: "hive_allowed_accesses_total",
      help: "Accesses allowed by an entry of their trap's allow list (counted, not alerted), by policy, trap and entry (its index in the list).",
      labelNames: ["policy_namespace", "policy", "trap_id", "entry"],
      registers,
      // Read from the pipeline's own counts at scrape time: labelling a counter per allowed access
      // cost as much as deciding it.
      collect() {
        if (!allowedSource) return;
        this.reset();
        for (const r of allowedSource())
          this.inc(
            {
              policy_namespace: r.namespace ?? "",
              policy: r.policy,
              trap_id: r.trapId,
              entry: String(r.entry),
            },
            r.count,
          );
      },
    }),
    deliveryAttempts: new Counter({
      name: "hive_alert_delivery_attempts_total",
      help: "HTTP POST attempts to alert callbacks, by destination origin.",
      labelNames: ["destination"],
      registers,
    }),
    deliveryFailures: new Counter({
      name: "hive_alert_delivery_failures_total",
      help: "Failed delivery attempts, by destination origin and failure class.",
      labelNames: ["destination", "class"],
      registers,
    }),
    deliveryRetries: new Counter({
      name: "hive_alert_delivery_retries_total",
      help: "Delivery attempts scheduled again after a retryable failure.",
      labelNames: ["destination"],
      registers,
    }),
    alertsDelivered: new Counter({
      name: "hive_alerts_delivered_total",
      help: "Alerts acknowledged (2xx) by their callback, by destination origin.",
      labelNames: ["destination"],
      registers,
    }),
    deliveryLatency: new Histogram({
      name: "hive_alert_delivery_latency_seconds",
      help: "Time from an alert being produced to its callback's 2xx, retries included.",
      labelNames: ["destination"],
      buckets: latencyBuckets,
      registers,
    }),
    alertsDropped: new Counter({
      name: "hive_alerts_dropped_total",
      help: "Alerts that will never be delivered, by reason.",
      labelNames: ["reason"],
      registers,
    }),
    pendingAlerts: new Gauge({
      name: "hive_spool_alerts",
      help: "Alerts waiting for delivery (spooled on disk, or held in memory without a spool).",
      registers,
    }),
    spoolBytes: new Gauge({
      name: "hive_spool_bytes",
      help: "Bytes the alert spool occupies (on disk, or in memory without a spool).",
      registers,
    }),
    spoolCapacityBytes: new Gauge({
      name: "hive_spool_capacity_bytes",
      help: "The bound of hive_spool_bytes: beyond it the oldest alerts are dropped (reason spool_full).",
      registers,
    }),
    spoolCorruptFiles: new Counter({
      name: "hive_spool_corrupt_files_total",
      help: "Spool files found corrupt at start-up (the readable part is kept, the rest skipped).",
      registers,
    }),
    spoolWriteErrors: new Counter({
      name: "hive_spool_write_errors_total",
      help: "Failed attempts to write the alert spool, by reason (enospc, edquot, eio, erofs, emfile, other); alerts wait in memory meanwhile.",
      labelNames: ["reason"],
      registers,
    }),
    watchedFiles,
    reconcileDuration: new Histogram({
      name: "hive_reconcile_duration_seconds",
      help: "Duration of one reconcile, by controller.",
      labelNames: ["controller"],
      buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30],
      registers,
    }),
    tenantCallbacksRefused: new Counter({
      name: "hive_tenant_callbacks_refused_total",
      help: "Alerts of policies outside the monitor's namespace whose callback is not among the monitor's tenantCallbacks: sent to the monitor's callback instead, the tenant's URL never contacted.",
      labelNames: ["policy_namespace"],
      registers,
    }),
    podsUncovered: new Gauge({
      name: "hive_policy_pods_uncovered",
      help: "Pods a policy's traps select that run on nodes without a ready Hive agent (their files are not watched; the policy's NodesCovered condition names them). Exported by the agent holding the pods role.",
      labelNames: ["policy_namespace", "policy"],
      registers,
    }),
    kernelEventsDropped: new Counter({
      name: "hive_kernel_events_dropped_total",
      help: "Kernel events dropped by the agent before alerting: unmatched (the file, or the live trap it was watched for, is no longer watched), hold_full (more events before the first sync after a restart than the hold keeps) or pipeline_error (the alert pipeline failed on the event; it is logged).",
      labelNames: ["reason"],
      registers,
    }),
    kubernetesEvents: new Counter({
      name: "hive_kubernetes_events_total",
      help: "Kubernetes Event writes for alerts, by result (created, patched, failed, throttled).",
      labelNames: ["result"],
      registers,
    }),
    observeKernel(source) {
      kernelSource = source;
    },
    observeAllowed(source) {
      allowedSource = source;
    },
    observeResolver(source) {
      resolverSource = source;
    },
    observeReadiness(source) {
      readinessSource = source;
    },
  };
}
