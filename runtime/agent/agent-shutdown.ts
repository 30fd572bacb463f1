/**
 * The agent's shutdown: the roles first (the loader closes the kernel program, then the Leases
 * are released), then what they fed — the image layers, the files beside the pinned maps, the
 * callback Secrets' watch, the container runtime — and last the alerts, drained, and the server.
 */
import type { RoutingSnapshotStore } from "../controllers/routing-snapshot.ts";
import type { MetricsServer } from "../metrics/index.ts";
import type { AgentAlerts } from "./agent-alerts.ts";
import type { AgentBase } from "./agent-base.ts";
import type { NodeDiscovery } from "./agent-discovery.ts";
import type { KernelSide } from "./agent-kernel.ts";
import type { NodeAgent } from "./node-agent.ts";
import { stopKind } from "./uninstall.ts";

export interface RunningAgent {
  base: AgentBase;
  agent: NodeAgent;
  discovery: NodeDiscovery;
  kernelSide: KernelSide;
  routingSnapshot: RoutingSnapshotStore;
  alerts: AgentAlerts;
  server: MetricsServer;
}

/** Alerts still undelivered at shutdown get this long (ms) before the pipeline closes. */
const ALERT_DRAIN_MS = 5000;

export async function shutDownAgent(running: RunningAgent, reason: unknown): Promise<void> {
  const { base, agent, discovery, kernelSide, routingSnapshot, alerts, server } = running;
  const { config, clients, log } = base;
  log.info("shutting down", { reason: String(reason) });
  // An uninstall takes the kernel program away; a restart leaves it attached for the next agent.
  const kind = await stopKind(clients.apps, config.namespace, config.daemonSet);
  log.info(
    kind.uninstall ? "uninstalled: detaching the kernel program" : "keeping the kernel program attached",
    { why: kind.why },
  );
  await agent.stop({ detach: kind.uninstall });
  discovery.layers?.close();
  await kernelSide.table?.idle();
  await routingSnapshot.idle();
  await alerts.stopSecretWatch();
  discovery.runtime.close();
  await alerts.pipeline.close({ drainMs: ALERT_DRAIN_MS });
  await server.close();
  log.info("agent stopped");
}
