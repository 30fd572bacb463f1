/**
 * The alert pipeline, composed: kernel event + watched file → allow list → rate limit →
 * Alert → stdout line, callback delivery (spooled) and a Kubernetes Event on the pod.
 * An access the trap's allow list matches stops at the first step: counted, never alerted,
 * and it spends none of the rate limit's budget.
 * The agent's loader controller and standalone `hive watch` both create one and call
 * `handle(event, source)` for every decoded kernel event.
 *
 * The steps of one event are in handle-event.ts; which callback an alert goes to (tenancy) in
 * callback-routing.ts.
 */
import type { Alert } from "../../api/alert.ts";
import type { Ancestor, KernelEvent, ProcessIdentity, RingGate } from "../kernel/contract.ts";
import type { Logger } from "../log.ts";
import type { CheckResult } from "../metrics/health.ts";
import type { HiveMetrics } from "../metrics/metrics.ts";
import type { AlertSource } from "./alert-source.ts";
import {
  type AllowedCounts,
  type AllowedFileWriter,
  type AllowedRecord,
  createAllowedCounts,
  createAllowedFileWriter,
} from "./allowed-counts.ts";
import { type BootClock, createBootClock } from "./boot-clock.ts";
import { CallbackRouter } from "./callback-routing.ts";
import {
  createDispatcher,
  type DestinationOptions,
  type Dispatcher,
  type DispatcherOptions,
} from "./delivery/dispatcher.ts";
import { handleEvent, type PipelineState } from "./handle-event.ts";
import type { PodEventRecorder } from "./pod-events.ts";
import { createTrapRateLimiter, type RateLimitOptions, type TrapRateLimiter } from "./rate-limit.ts";
import { openSpool, type Spool, type SpoolOptions } from "./spool/spool.ts";
import { type LineSink, stdoutSink } from "./stdout-sink.ts";

export interface AlertPipelineConfig {
  logger: Logger;
  metrics: HiveMetrics;
  /** The monitor's callback: used for traps without their own. Without either, alerts go to stdout only. */
  defaultCallback?: string;
  /**
   * Tenancy (api/tenancy.ts): a trap callback of a policy outside `platformNamespace` is used
   * only when it is the default callback or under one of `callbacks`; otherwise the alert goes
   * to the default callback and the tenant's URL is never contacted. Without it every trap
   * callback is used (standalone mode).
   */
  tenancy?: { platformNamespace: string; callbacks: readonly string[] };
  /** Where each alert's JSON line goes; default stdout. `false` disables it (benchmarks). */
  lines?: LineSink | false;
  /** Durable spool (a hostPath directory in the cluster); without it undelivered alerts are kept in memory only. */
  spool?: Omit<SpoolOptions, "logger" | "onDrop" | "onCorrupt" | "onWriteError">;
  /** Delivery tuning and per-URL-prefix secrets/format (see DispatcherOptions). */
  delivery?: Omit<DispatcherOptions, "logger" | "metrics" | "spool">;
  /** Rate limit per trap × container × executable; `false` disables it. Default 100/s, burst 200. */
  rateLimit?: RateLimitOptions | false;
  /**
   * Where the counts of allowed accesses are written for `hive status`
   * (runtime/alerts/allowed-counts.ts allowedFileFor); without it they are only in the metric.
   */
  allowedFile?: string;
  /** How often the allowed counts are written when they changed; default 2000 ms. */
  allowedFlushMs?: number;
  /** Kubernetes Events on the accessed pod (createPodEventRecorder); optional. */
  podEvents?: PodEventRecorder;
  /** The parent's ancestors from the kernel (KernelWatcher.ancestors), looked up only for alerts. */
  ancestors?: (process: ProcessIdentity) => Ancestor[];
  clock?: BootClock;
  newId?: () => string;
}

export interface AlertPipeline {
  /**
   * One decoded kernel event for a watched file. Synchronous and never throws: returns the
   * alert produced, or undefined when the trap's allow list allowed the access or the rate
   * limit suppressed it.
   */
  handle(event: KernelEvent, source: AlertSource): Alert | undefined;
  /** Accesses allowed so far, by trap and allow entry (what `hive status` shows). */
  allowed(): AllowedRecord[];
  /** Adds `count` checks the kernel allowed (never an event) to the counts of the source's entry. */
  addAllowed(source: AlertSource, entry: number, count: number): void;
  /** Waits until every queued alert is delivered or given up (true), or timeoutMs passes (false). */
  drain(timeoutMs?: number): Promise<boolean>;
  /** Alerts waiting for delivery. */
  pending(): number;
  /** New callback secrets/format (from resolveDestinations after a Secret changed); next attempts use them. */
  setDestinations(destinations: readonly DestinationOptions[]): void;
  /**
   * What the kernel's ring must keep for these alerts (for KernelWatcher.gateRelease): with a
   * spool, an event's ring space is released only once its alert is on disk or delivered, and
   * reading pauses while half the memory for unwritten alerts is used (the spool then takes what
   * was already on its way instead of refusing it). Undefined without a spool.
   */
  ringGate(): RingGate | undefined;
  /** Readiness check for the metrics server: fails while the spool cannot be written. */
  health(): CheckResult;
  /** Stops delivery and flushes the spool; undelivered alerts are delivered after the next start. */
  close(options?: { drainMs?: number }): Promise<void>;
}

export async function createAlertPipeline(config: AlertPipelineConfig): Promise<AlertPipeline> {
  const { logger, metrics } = config;
  const clock = config.clock ?? createBootClock();
  const lines = config.lines === false ? undefined : (config.lines ?? stdoutSink());
  const limiter: TrapRateLimiter | undefined =
    config.rateLimit === false ? undefined : createTrapRateLimiter(config.rateLimit ?? {});
  const { spool, dispatcher } = openDelivery(config);
  const context = {
    clock,
    ...(config.ancestors ? { ancestors: config.ancestors } : {}),
    ...(config.newId ? { newId: config.newId } : {}),
  };
  const allowedCounts = createAllowedCounts();
  const allowedWriter = openAllowedWriter(config, allowedCounts);
  metrics.observeAllowed(() => allowedCounts.records());

  const state: PipelineState = {
    logger,
    metrics,
    context,
    lines,
    limiter,
    allowedCounts,
    router: new CallbackRouter({
      defaultCallback: config.defaultCallback,
      tenancy: config.tenancy,
      logger,
      metrics,
    }),
    dispatcher,
    podEvents: config.podEvents,
    closed: false,
  };

  return {
    handle: (event, source) => handleEvent(state, event, source),
    allowed: () => allowedCounts.records(),
    addAllowed: (source, entry, count) =>
      allowedCounts.add(source, entry, source.allow?.[entry] ?? {}, count),
    ringGate() {
      if (!spool) return undefined;
      spool.softenMemoryLimit();
      return ringGateOf(spool);
    },
    drain: (timeoutMs) => dispatcher.idle(timeoutMs),
    pending: () => dispatcher.pending(),
    setDestinations: (list) => dispatcher.setDestinations(list),
    health() {
      const writeError = spool?.stats().writeError;
      return writeError ? { ok: false, message: `alert spool not writable: ${writeError}` } : { ok: true };
    },
    close: (options = {}) => closePipeline(state, spool, allowedWriter, options.drainMs),
  };
}

/** The spool (when configured) and the dispatcher that delivers from it. */
function openDelivery(config: AlertPipelineConfig): { spool: Spool | undefined; dispatcher: Dispatcher } {
  const { logger, metrics } = config;
  // Bound late: the spool reports the segments its bounds drop to the dispatcher created after it.
  let dispatcher: Dispatcher | undefined;
  const spool: Spool | undefined = config.spool
    ? openSpool({
        ...config.spool,
        logger: logger.child({ component: "alert-spool" }),
        onDrop: (drop) => dispatcher?.spoolSegmentDropped(drop),
        onCorrupt: () => metrics.spoolCorruptFiles.inc(),
        onWriteError: (reason) => metrics.spoolWriteErrors.inc({ reason }),
      })
    : undefined;
  dispatcher = createDispatcher({
    ...config.delivery,
    logger: logger.child({ component: "alert-delivery" }),
    metrics,
    ...(spool ? { spool } : {}),
  });
  return { spool, dispatcher };
}

/** Writes the allowed counts for `hive status`, when a file is configured. */
function openAllowedWriter(
  config: AlertPipelineConfig,
  counts: AllowedCounts,
): AllowedFileWriter | undefined {
  if (!config.allowedFile) return undefined;
  return createAllowedFileWriter({
    file: config.allowedFile,
    counts,
    logger: config.logger.child({ component: "allowed-counts" }),
    ...(config.allowedFlushMs !== undefined ? { intervalMs: config.allowedFlushMs } : {}),
  });
}

/** Stops delivery (after draining up to `drainMs`), then everything that writes; undelivered alerts stay spooled. */
async function closePipeline(
  state: PipelineState,
  spool: Spool | undefined,
  allowedWriter: AllowedFileWriter | undefined,
  drainMs: number | undefined,
): Promise<void> {
  if (state.closed) return;
  state.closed = true;
  const { dispatcher, metrics } = state;
  if (drainMs && drainMs > 0) await dispatcher.idle(drainMs);
  await dispatcher.close();
  await state.podEvents?.close();
  await allowedWriter?.close();
  const lost = spool?.close().unwritten ?? 0;
  if (lost > 0) metrics.alertsDropped.inc({ reason: "spool_unwritable" }, lost);
  const unreported = state.limiter?.pending();
  if (unreported && unreported.size > 0) {
    state.logger.info("alerts suppressed by rate limiting and not yet reported in an alert", {
      traps: Object.fromEntries(unreported),
    });
  }
}

/** The ring gate of a spool (AlertPipeline.ringGate). */
function ringGateOf(spool: Spool): RingGate {
  return {
    holding: () => spool.stats().unwritten > 0,
    // Half: the batch being handled when it fills still fits.
    full: () => {
      const { unwrittenBytes, maxUnwrittenBytes } = spool.stats();
      return unwrittenBytes * 2 >= maxUnwrittenBytes;
    },
  };
}
