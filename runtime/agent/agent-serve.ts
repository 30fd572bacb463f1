/**
 * The agent's health and metrics endpoints: the readiness checks (/readyz, and hive_agent_ready
 * at each scrape) and the server of /metrics, /healthz and /readyz.
 */
import { type CheckResult, createHealth, type MetricsServer, startMetricsServer } from "../metrics/index.ts";
import type { AgentAlerts, CallbackCredentials } from "./agent-alerts.ts";
import type { AgentBase } from "./agent-base.ts";
import type { KernelSide } from "./agent-kernel.ts";
import { addNodeAgentReadinessChecks } from "./kernel-readiness.ts";
import type { NodeAgent } from "./node-agent.ts";

export function serveHealthAndMetrics(
  { config, log, metrics }: AgentBase,
  agent: NodeAgent,
  kernelSide: KernelSide,
  alerts: AgentAlerts,
): Promise<MetricsServer> {
  const health = createHealth();
  addNodeAgentReadinessChecks(health, agent, () => kernelSide.kernel);
  health.addReadinessCheck("alert-spool", () => alerts.pipeline.health());
  health.addReadinessCheck("callback-credentials", () => credentialsCheck(alerts.credentials));
  health.addLivenessCheck("event-loop", () => true);
  metrics.observeReadiness(async () => (await health.readiness()).ok);
  return startMetricsServer({ registry: metrics.registry, health, port: config.metricsPort, logger: log });
}

/** Not ready while the default callback's credentials are unknown: its alerts wait. */
export function credentialsCheck(credentials: CallbackCredentials): CheckResult {
  return credentials.pending === undefined
    ? { ok: true }
    : { ok: false, message: `the callback's Secrets are not read yet: ${credentials.pending}` };
}
