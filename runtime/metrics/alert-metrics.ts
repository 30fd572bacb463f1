/**
 * The alerts' metrics: what the pipeline produced, suppressed and allowed, how delivery to the
 * callbacks went, what waits in the spool, and the alerts' side effects on the cluster
 * (tenant callbacks refused, Kubernetes Events written).
 */
import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import type { HiveMetrics } from "./metrics.ts";
import type { ScrapeSources } from "./scrape-sources.ts";

/** Seconds, from a local receiver's millisecond to a callback retried for minutes. */
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

/** What the pipeline made of the accesses: alerts, rate-limited ones, allowed ones. */
export function defineProductionMetrics(
  registers: Registry[],
  sources: ScrapeSources,
): Pick<HiveMetrics, "alerts" | "alertsSuppressed" | "allowedAccesses"> {
  return {
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
        if (!sources.allowed) return;
        this.reset();
        for (const r of sources.allowed())
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
  };
}

/** Delivery to the callbacks, by destination origin: attempts, failures, retries, successes, losses. */
export function defineDeliveryMetrics(
  registers: Registry[],
): Pick<
  HiveMetrics,
  | "deliveryAttempts"
  | "deliveryFailures"
  | "deliveryRetries"
  | "alertsDelivered"
  | "deliveryLatency"
  | "alertsDropped"
> {
  return {
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
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    alertsDropped: new Counter({
      name: "hive_alerts_dropped_total",
      help: "Alerts that will never be delivered, by reason.",
      labelNames: ["reason"],
      registers,
    }),
  };
}

/** Alerts waiting for delivery: how many, how much room they take, what their store failed at. */
export function defineSpoolMetrics(
  registers: Registry[],
): Pick<
  HiveMetrics,
  "pendingAlerts" | "spoolBytes" | "spoolCapacityBytes" | "spoolCorruptFiles" | "spoolWriteErrors"
> {
  return {
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
  };
}

export function tenantCallbacksRefusedCounter(registers: Registry[]): HiveMetrics["tenantCallbacksRefused"] {
  return new Counter({
    name: "hive_tenant_callbacks_refused_total",
    help: "Alerts of policies outside the monitor's namespace whose callback is not among the monitor's tenantCallbacks: sent to the monitor's callback instead, the tenant's URL never contacted.",
    labelNames: ["policy_namespace"],
    registers,
  });
}

export function kubernetesEventsCounter(registers: Registry[]): HiveMetrics["kubernetesEvents"] {
  return new Counter({
    name: "hive_kubernetes_events_total",
    help: "Kubernetes Event writes for alerts, by result (created, patched, failed, throttled).",
    labelNames: ["result"],
    registers,
  });
}
