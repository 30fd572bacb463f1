/**
 * One kernel event through the pipeline's steps: the trap's allow list (an allowed access is
 * counted and stops here, spending none of the rate limit's budget), the rate limit, the
 * Alert, and where it goes (its JSON line, its callback, an Event on the pod). Never throws:
 * a failure is counted as a dropped kernel event and logged.
 */
import type { Alert } from "../../api/alert.ts";
import { HiveError } from "../../api/errors.ts";
import type { KernelEvent } from "../kernel/contract.ts";
import type { Logger } from "../log.ts";
import type { HiveMetrics } from "../metrics/metrics.ts";
import { type AlertSource, trapIdOf } from "./alert-source.ts";
import type { AllowedCounts } from "./allowed-counts.ts";
import { allowDecision, allowingEntry } from "./allowlist.ts";
import { type AlertContext, buildAlert } from "./build-alert.ts";
import type { CallbackRouter } from "./callback-routing.ts";
import type { Dispatcher } from "./delivery/dispatcher.ts";
import type { PodEventRecorder } from "./pod-events.ts";
import type { RateKey, TrapRateLimiter } from "./rate-limit.ts";
import type { LineSink } from "./stdout-sink.ts";

/** What the steps work with; created and closed by the pipeline (pipeline.ts). */
export interface PipelineState {
  logger: Logger;
  metrics: HiveMetrics;
  context: AlertContext;
  lines: LineSink | undefined;
  limiter: TrapRateLimiter | undefined;
  allowedCounts: AllowedCounts;
  router: CallbackRouter;
  dispatcher: Dispatcher;
  podEvents: PodEventRecorder | undefined;
  /** Once closed, alerts are still built and printed but no longer queued for delivery. */
  closed: boolean;
}

/** The alert produced, or undefined when the allow list allowed the access or the rate limit suppressed it. */
export function handleEvent(
  state: PipelineState,
  event: KernelEvent,
  source: AlertSource,
): Alert | undefined {
  try {
    const trapId = trapIdOf(source);
    // Before the rate limit: an expected reader is counted, and spends no alert budget.
    const allow = source.allow;
    const scope = allow === undefined ? undefined : { files: source.allowFiles, host: source.allowHost };
    const entry = allow === undefined ? undefined : allowingEntry(allow, event, scope);
    if (entry !== undefined) {
      state.allowedCounts.add(source, entry, allow?.[entry] ?? {});
      return undefined;
    }
    const suppressed = takeRateLimit(state, rateKeyOf(event, source, trapId));
    if (suppressed === undefined) return undefined;
    // Why no entry held, for the alert: worked out only for an access that alerts.
    const verdict = allow === undefined ? undefined : allowDecision(allow, event, scope);
    const misses = verdict !== undefined && "misses" in verdict ? verdict.misses : undefined;
    const alert = buildAlert(event, source, state.context, suppressed, misses);
    emitAlert(state, alert, event, source, trapId);
    return alert;
  } catch (error) {
    reportFailure(state, event, error);
    return undefined;
  }
}

/** The rate limit's key: trap × container × the executable as the kernel recorded it. */
export function rateKeyOf(
  event: Pick<KernelEvent, "process">,
  source: Pick<AlertSource, "annotations">,
  trapId: string,
): RateKey {
  const identity = event.process?.exe;
  return {
    trapId,
    container: source.annotations.container_id || "host",
    exe: identity?.source !== "unknown" && identity?.exe ? identity.exe : "unknown",
  };
}

/** Accesses suppressed before this one (the alert carries them); undefined when this one is suppressed. */
function takeRateLimit(state: PipelineState, key: RateKey): number | undefined {
  if (!state.limiter) return 0;
  const decision = state.limiter.take(key);
  if (decision.allowed) return decision.suppressed;
  state.metrics.alertsSuppressed.inc({ trap_id: key.trapId });
  return undefined;
}

function emitAlert(
  state: PipelineState,
  alert: Alert,
  event: KernelEvent,
  source: AlertSource,
  trapId: string,
): void {
  state.metrics.alerts.inc({
    policy_namespace: alert.hive_policy_namespace ?? "",
    policy: alert.hive_policy_name,
    trap_id: trapId,
  });
  const json = JSON.stringify(alert);
  state.lines?.(json);
  const callback = state.router.destinationOf(source);
  if (callback && !state.closed) {
    state.dispatcher.enqueue({
      id: alert.id,
      url: callback,
      trapId,
      createdMs: state.context.clock.toEpochMs(event.ktimeNs),
      body: json,
    });
  }
  state.podEvents?.record(alert, source.podUid);
}

/**
 * What a container controls (its comm, its pid…) must never crash the agent; the access is
 * not silently gone either: counted, and logged with what identifies it.
 */
function reportFailure(state: PipelineState, event: KernelEvent, error: unknown): void {
  state.metrics.kernelEventsDropped.inc({ reason: "pipeline_error" });
  state.logger.error("cannot produce an alert for a kernel event; counted as dropped", {
    error:
      error instanceof HiveError
        ? error
        : new HiveError("DeliveryFailed", "alert pipeline failed", { cause: error }),
    slot: event.slot,
    tgid: event.tgid,
    pid: event.pid,
    exe: event.process?.exe?.exe,
    inode: event.key?.ino?.toString(),
  });
}
