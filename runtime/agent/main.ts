/**
 * `hive agent`: the DaemonSet's process. Composes configuration, the Kubernetes clients,
 * the container runtime, the kernel program (opened only while this node is its kernel's
 * loader), the alert pipeline and /metrics /healthz /readyz; runs until SIGTERM, then stops
 * the roles, releases the Leases, detaches the kernel program and drains alerts. Each step has
 * its file: agent-base, agent-alerts, agent-discovery, agent-kernel, start-roles, agent-serve,
 * agent-shutdown.
 */

import { isHiveError } from "../../api/errors.ts";
import { EXIT } from "../cli/exit-codes.ts";
import { checkArchitecture } from "../kernel/architecture.ts";
import type { KernelWatcher } from "../kernel/contract.ts";
import { createLogger, type Logger } from "../log.ts";
import { accessHandler, allowedHandler, startAgentAlerts } from "./agent-alerts.ts";
import { createAgentBase } from "./agent-base.ts";
import { startDiscovery } from "./agent-discovery.ts";
import {
  createAgentRoutingSnapshot,
  createKernelSide,
  kernelSideOpener,
  libbpfOpener,
} from "./agent-kernel.ts";
import { serveHealthAndMetrics } from "./agent-serve.ts";
import { shutDownAgent } from "./agent-shutdown.ts";
import { AGENT_USAGE, type AgentConfig, parseAgentConfig } from "./config.ts";
import { mallocTrim, startMemoryTrim } from "./memory-trim.ts";
import { startRoles } from "./start-roles.ts";

export interface AgentHooks {
  /** Replaces the libbpf loader, and with it the trap proofs that need its maps (tests on machines whose kernel cannot attach kprobes). */
  openKernel?: () => Promise<KernelWatcher>;
  /** Resolves to end the agent (default: the first SIGTERM/SIGINT). */
  until?: Promise<unknown>;
  /** Boot id override (tests simulating several kernels on one machine). */
  kernelId?: string;
  log?: Logger;
  /** Called once everything is started, with the metrics URL. */
  onStarted?: (info: { metricsUrl: string; config: AgentConfig }) => void;
}

function untilSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const stop = (signal: NodeJS.Signals) => {
      process.off("SIGTERM", stop);
      process.off("SIGINT", stop);
      resolve(signal);
    };
    process.on("SIGTERM", stop);
    process.on("SIGINT", stop);
  });
}

/** Entry point of `hive agent`: returns the process exit code. */
export async function runAgent(argv: string[], hooks: AgentHooks = {}): Promise<number> {
  const start = readStartConfig(argv, hooks.log);
  if ("exitCode" in start) return start.exitCode;
  const { config } = start;
  const base = createAgentBase(config, hooks);
  const kernelSide = createKernelSide();
  const alerts = await startAgentAlerts(base, () => kernelSide.kernel);
  // A replaced loader (tests) has no pinned maps to prove traps with.
  const discovery = await startDiscovery(base, !hooks.openKernel && config.trapProof);
  const routingSnapshot = createAgentRoutingSnapshot(base);
  const openKernel = hooks.openKernel ?? libbpfOpener(base);
  const agent = await startRoles({
    base,
    discovery,
    kernelSide,
    routingSnapshot,
    openKernel: kernelSideOpener(kernelSide, openKernel, base, alerts.pipeline),
    onAccess: accessHandler(base, alerts.pipeline),
    onAllowed: allowedHandler(base, alerts.pipeline),
  });
  const server = await serveHealthAndMetrics(base, agent, kernelSide, alerts);
  base.log.info("agent started", { kernelId: base.kernelId, metrics: server.url, roles: config.roles });
  hooks.onStarted?.({ metricsUrl: server.url, config });
  const stopTrim = startMemoryTrim(base.log, { trim: await mallocTrim() });

  const reason = await (hooks.until ?? untilSignal());
  stopTrim();
  await shutDownAgent({ base, agent, discovery, kernelSide, routingSnapshot, alerts, server }, reason);
  return 0;
}

/**
 * The configuration to run with, or the exit code without one: after --help (0), an invalid
 * configuration (2), or a machine the kernel program is not built for.
 */
function readStartConfig(
  argv: string[],
  log: Logger | undefined,
): { config: AgentConfig } | { exitCode: number } {
  if (argv.includes("--help") || argv.includes("-h")) {
    process.stdout.write(`${AGENT_USAGE}\n`);
    return { exitCode: 0 };
  }
  const base = log ?? createLogger({ component: "hive-agent" });
  let config: AgentConfig;
  try {
    config = parseAgentConfig(argv);
  } catch (error) {
    base.error("invalid configuration", { error });
    if (isHiveError(error)) process.stderr.write(`hive agent: ${error.describe()}\n`);
    return { exitCode: 2 };
  }
  try {
    checkArchitecture();
  } catch (error) {
    base.error("unsupported architecture", { error });
    if (isHiveError(error)) process.stderr.write(`hive agent: ${error.describe()}\n`);
    return { exitCode: EXIT.kernel };
  }
  return { config };
}
