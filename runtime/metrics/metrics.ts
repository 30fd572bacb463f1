/**
 * Hive's Prometheus metrics: one registry per agent, one folder that names every metric,
 * so the metrics table of docs/operations.md, the dashboards and the code cannot disagree. Parts of the agent
 * receive the `HiveMetrics` object and only increment; they never create metrics. This file
 * composes the definitions, grouped by what they measure: agent-metrics.ts (the process),
 * kernel-metrics.ts, controller-metrics.ts, alert-metrics.ts (production, delivery, spool).
 *
 * Label cardinality is bounded on purpose: `destination` is a URL's origin
 * (scheme://host:port, never its path or query), `trap_id` is bounded by the traps of the
 * cluster's policies, `entry` by the 64 entries of a trap's allow list, `class`/`reason`/`result`
 * are closed sets named below.
 */
import { type Counter, collectDefaultMetrics, type Gauge, type Histogram, Registry } from "prom-client";
import { type BuildInfo, buildInfo } from "../build-info.ts";
import { defineAgentMetrics } from "./agent-metrics.ts";
import {
  defineDeliveryMetrics,
  defineProductionMetrics,
  defineSpoolMetrics,
  kubernetesEventsCounter,
  tenantCallbacksRefusedCounter,
} from "./alert-metrics.ts";
import {
  defineResolverMetrics,
  podsUncoveredGauge,
  reconcileDurationHistogram,
} from "./controller-metrics.ts";
import { defineKernelMetrics, kernelEventsDroppedCounter } from "./kernel-metrics.ts";
import type {
  AllowedCountsSource,
  KernelCountersSource,
  ReadinessSource,
  ResolverStatsSource,
  ScrapeSources,
} from "./scrape-sources.ts";

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
 * Why a kernel event was dropped before it became an alert (hive_kernel_events_dropped_total, its
 * help names each):
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

export type {
  AllowedCountsSource,
  KernelCountersSource,
  ReadinessSource,
  ResolverStatsSource,
} from "./scrape-sources.ts";

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
  const sources: ScrapeSources = {};
  // Registered in this order, which is the order a scrape lists them in.
  defineAgentMetrics(registers, options.build ?? buildInfo(), sources);
  const { watchedFiles } = defineKernelMetrics(registers, sources);
  defineResolverMetrics(registers, sources);
  const production = defineProductionMetrics(registers, sources);
  const delivery = defineDeliveryMetrics(registers);
  const spool = defineSpoolMetrics(registers);
  const reconcileDuration = reconcileDurationHistogram(registers);
  const tenantCallbacksRefused = tenantCallbacksRefusedCounter(registers);
  const podsUncovered = podsUncoveredGauge(registers);
  const kernelEventsDropped = kernelEventsDroppedCounter(registers);
  const kubernetesEvents = kubernetesEventsCounter(registers);
  return {
    registry,
    ...production,
    ...delivery,
    ...spool,
    watchedFiles,
    reconcileDuration,
    kubernetesEvents,
    kernelEventsDropped,
    tenantCallbacksRefused,
    podsUncovered,
    observeKernel(source) {
      sources.kernel = source;
    },
    observeAllowed(source) {
      sources.allowed = source;
    },
    observeResolver(source) {
      sources.resolver = source;
    },
    observeReadiness(source) {
      sources.readiness = source;
    },
  };
}
