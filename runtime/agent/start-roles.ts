/**
 * Starts this node's roles (node-agent.ts): discover, and the loader and pods roles where this
 * agent is elected, wired to this process's discovery, kernel side, alerts and metrics.
 */
import type { LoaderOptions } from "../controllers/loader.ts";
import type { RoutingSnapshotStore } from "../controllers/routing-snapshot.ts";
import type { KernelWatcher } from "../kernel/contract.ts";
import { WATCH_TABLE_DIR } from "../standalone/watch-table-file.ts";
import type { AgentBase } from "./agent-base.ts";
import type { NodeDiscovery } from "./agent-discovery.ts";
import { isResumable, type KernelSide, kernelSynced, trapErrorsRecorder } from "./agent-kernel.ts";
import type { AgentConfig } from "./config.ts";
import { agentIdentity } from "./loader-election.ts";
import { type NodeAgent, type NodeAgentOptions, startNodeAgent } from "./node-agent.ts";
import { loaderLockFileFor } from "./node-lock.ts";

export interface RoleInputs {
  base: AgentBase;
  discovery: NodeDiscovery;
  kernelSide: KernelSide;
  /** Opens the kernel program when this node becomes its kernel's loader (agent-kernel.ts). */
  openKernel: () => Promise<KernelWatcher>;
  routingSnapshot: RoutingSnapshotStore;
  onAccess: LoaderOptions["onAccess"];
  onAllowed?: LoaderOptions["onAllowed"];
}

export async function startRoles(inputs: RoleInputs): Promise<NodeAgent> {
  const agent = await startNodeAgent(nodeAgentOptions(inputs));
  inputs.discovery.onLayersChanged = () => agent.discover.onLayersChanged();
  return agent;
}

export function nodeAgentOptions(inputs: RoleInputs): NodeAgentOptions {
  const { base, discovery, kernelSide, routingSnapshot } = inputs;
  const { config, clients, kernelId, metrics, log, pinRoot } = base;
  return {
    ...(discovery.layers ? { layers: discovery.layers } : {}),
    ...(discovery.originOf ? { originOf: discovery.originOf } : {}),
    routingSnapshot,
    resumable: () => isResumable(pinRoot, routingSnapshot),
    clients,
    nodeName: config.nodeName,
    identity: agentIdentity(config.nodeName, config.podName),
    namespace: config.namespace,
    kernelId,
    resolver: discovery.resolver,
    openKernel: inputs.openKernel,
    loaderLock: loaderLockFileFor(pinRoot, config.tableDir ?? WATCH_TABLE_DIR),
    onKernelSynced: kernelSynced(kernelSide),
    onTrapErrors: trapErrorsRecorder(kernelSide),
    observeReconcile: (controller, seconds) => metrics.reconcileDuration.observe({ controller }, seconds),
    podsUncoveredGauge: metrics.podsUncovered,
    onEventDropped: (reason) => metrics.kernelEventsDropped.inc({ reason }),
    onAccess: inputs.onAccess,
    ...(inputs.onAllowed ? { onAllowed: inputs.onAllowed } : {}),
    log,
    roles: config.roles,
    sharedKernels: config.sharedKernels,
    lease: config.lease,
    ...reportsOption(config),
  };
}

/** The pods role's reports, unless turned off (`--reports none`). */
export function reportsOption(
  config: Pick<AgentConfig, "reports" | "reportFailWindowHours">,
): Pick<NodeAgentOptions, "reports"> {
  if (config.reports === "none") return {};
  return { reports: { format: config.reports, failWindowMs: config.reportFailWindowHours * 3_600_000 } };
}
