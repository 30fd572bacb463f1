/**
 * One node's agent, composed: discover always runs; the loader role runs where this agent
 * holds its node's lock and its kernel's Lease (loader-election.ts: an API-server outage never
 * ends it), the pods role where it holds the cluster-wide Lease (`hive-pods`). A role's
 * informers and controller live exactly as long as its leadership (agent-roles.ts; the roles
 * themselves: loader-role.ts, pods-role.ts, over what node-agent-context.ts shares).
 * main.ts adds flags, signals and the HTTP endpoints; tests and the benchmark start several
 * of these in one process, one per simulated node.
 */

import type { ReportFormat } from "../../api/report.ts";
import {
  createDiscoverController,
  type DiscoverController,
  type LayerFinder,
} from "../controllers/discover.ts";
import { type FeedOptions, nodeDataFeed, nodePodFeed } from "../controllers/feeds.ts";
import { createDataWriter, createTrapErrorReporter } from "../controllers/kube-ports.ts";
import type { LoaderController, LoaderOptions } from "../controllers/loader.ts";
import type { PodsController, PodsUncoveredGauge } from "../controllers/pods.ts";
import type { NodeTrapError, TrapErrorReporter } from "../controllers/ports.ts";
import type { RoutingSnapshotStore } from "../controllers/routing-snapshot.ts";
import type { OriginOf } from "../discover/cgroup-containers.ts";
import type { FileResolver } from "../discover/file-resolver.ts";
import type { KubeClients } from "../k8s/kube-client.ts";
import { LeaderElector, type LeaseTiming } from "../k8s/lease.ts";
import type { KernelWatcher } from "../kernel/contract.ts";
import type { Logger } from "../log.ts";
import type { CheckResult } from "../metrics/health.ts";
import { createRoleRunner, type Leadership, type RunningInformer, sharedPolicyFeed } from "./agent-roles.ts";
import { createNodeKernelCheck, createNodeOwner, type NodeKernelCheck } from "./kernel-nodes.ts";
import { LoaderElector } from "./loader-election.ts";
import { loaderRole } from "./loader-role.ts";
import type { AgentContext, AgentState } from "./node-agent-context.ts";
import type { RoleElector } from "./node-lock.ts";
import { podsRole } from "./pods-role.ts";
import { createArmedCheck } from "./traps-armed.ts";

export type { RunningInformer } from "./agent-roles.ts";

export interface NodeAgentOptions {
  clients: KubeClients;
  nodeName: string;
  /** This agent's identity in elections (the pod name). */
  identity: string;
  /** Namespace of the Leases (the agent's own namespace). */
  namespace: string;
  kernelId: string;
  /**
   * Nodes of this cluster may share a kernel (containers on one host, as kind's): another node
   * that reports this kernel's boot id may hold its Lease and arm files in it. Default false.
   */
  sharedKernels?: boolean;
  resolver: FileResolver;
  /** The node's image layers: traps armed there before containers start (discover). */
  layers?: LayerFinder;
  /** The container of an access by its cgroup (accesses to image layers' files). */
  originOf?: OriginOf;
  /** Opens the kernel program when this node becomes its kernel's loader. */
  openKernel: () => Promise<KernelWatcher>;
  onAccess: LoaderOptions["onAccess"];
  /** Checks the kernel's allow rules let through, by trap and entry (LoaderOptions.onAllowed). */
  onAllowed?: LoaderOptions["onAllowed"];
  /** After each sync of the kernel map by this node's loader (see LoaderOptions.onSynced). */
  onKernelSynced?: LoaderOptions["onSynced"];
  /** A kernel event dropped before alerting (LoaderOptions.onEventDropped). */
  onEventDropped?: LoaderOptions["onEventDropped"];
  /** This node's trap errors, each time discover reports them (traps not armed, and why). */
  onTrapErrors?: (errors: readonly NodeTrapError[]) => void;
  /**
   * The loader role's lock file: one per kernel, shared by every agent of the node (the
   * host's /run/hive). Whoever holds it loads and syncs the kernel program.
   */
  loaderLock: string;
  /** hive_policy_pods_uncovered, kept by the pods role while this agent holds it. */
  podsUncoveredGauge?: PodsUncoveredGauge;
  /** How long a node is without a ready agent before policies report its pods (default 60 s). */
  uncoveredGraceMs?: number;
  /**
   * PolicyReports per namespace, written by the pods role (runtime/reports/): off when undefined,
   * and waiting (said in the log) while the API server does not serve them (no CRD yet).
   */
  reports?: { format: ReportFormat; debounceMs?: number; failWindowMs?: number; recheckMs?: number };
  /** Duration of each reconcile pass, by controller (discover, loader, pods). */
  observeReconcile?: (controller: "discover" | "loader" | "pods", seconds: number) => void;
  log: Logger;
  roles?: { loader?: boolean; pods?: boolean };
  lease?: Partial<LeaseTiming>;
  /** The kernel Lease's timing (loader-election.ts LOADER_LEASE_TIMING by default). */
  loaderLease?: Partial<LeaseTiming>;
  /**
   * The loader's routing, kept on the node (routing-snapshot.ts); with `resumable`, a restarted
   * agent routes events from it before the API server answers.
   */
  routingSnapshot?: RoutingSnapshotStore;
  /** True when this node's last loader left the kernel's program pinned (LoaderElectorOptions.resumable). */
  resumable?: () => boolean;
  /** Controller tuning (tests shorten these). */
  orphanGraceMs?: number;
  retryBaseMs?: number;
  notReadyReportMs?: number;
  pageSize?: number;
}

export interface NodeAgent {
  readonly discover: DiscoverController;
  /** The running loader, while this node holds its kernel's Lease. */
  loader(): LoaderController | undefined;
  pods(): PodsController | undefined;
  /** Discover's caches are synced (readiness). */
  ready(): boolean;
  /** Why this node, elected loader, could not load the kernel program (readiness). */
  loaderFailure(): string | undefined;
  /** Readiness: the program attached and what the agent found at start armed (traps-armed.ts). */
  armed(): CheckResult;
  informers(): RunningInformer[];
  /**
   * Stops the roles, releases the Leases (unless `release: false`, as a crash would). The kernel
   * program stays pinned for the next agent unless `detach` (an uninstall: uninstall.ts).
   */
  stop(options?: { release?: boolean; detach?: boolean }): Promise<void>;
}

export const PODS_LEASE = "hive-pods";

/** The reporter, also telling `listener` what it is given (for the watch table `hive status` reads). */
function withTrapErrorListener(
  reporter: TrapErrorReporter,
  listener: ((errors: readonly NodeTrapError[]) => void) | undefined,
): TrapErrorReporter {
  if (!listener) return reporter;
  return {
    sync: (errors) => {
      listener(errors);
      return reporter.sync(errors);
    },
  };
}

export async function startNodeAgent(options: NodeAgentOptions): Promise<NodeAgent> {
  const { clients, nodeName, kernelId, log } = options;
  const feedOptions: FeedOptions = {
    clients,
    log,
    ...(options.pageSize ? { pageSize: options.pageSize } : {}),
  };
  const roles = createRoleRunner();
  const reconcileObserver =
    (controller: "discover" | "loader" | "pods") =>
    (seconds: number): void =>
      options.observeReconcile?.(controller, seconds);
  const writer = createDataWriter(clients.custom);
  const state: AgentState = { loaderFailure: undefined, detaching: false, kernel: undefined };
  const discover = createDiscoverController({
    nodeName,
    platformNamespace: options.namespace,
    kernelId,
    resolver: options.resolver,
    ...(options.layers ? { layers: options.layers } : {}),
    writer,
    nodeOwner: createNodeOwner(clients, nodeName),
    reporter: withTrapErrorListener(createTrapErrorReporter(clients.core, nodeName), options.onTrapErrors),
    log: log.child({ controller: "discover" }),
    ...(options.observeReconcile ? { observeReconcile: reconcileObserver("discover") } : {}),
    ...(options.retryBaseMs ? { retryBaseMs: options.retryBaseMs } : {}),
    ...(options.notReadyReportMs !== undefined ? { notReadyReportMs: options.notReadyReportMs } : {}),
    denyUnavailable: () => {
      const deny = state.kernel?.denyState?.();
      return deny?.available === false ? deny.reason : undefined;
    },
    // A file re-resolved here is armed by this agent's loader (when it is the kernel's) at once:
    // the watch of the written HiveData brings the same object again later.
    onDesired: (d) => roles.leading.loader?.onData("MODIFIED", d),
    // Accesses an image layer's file attributes to a pod are selected by what the pod cache shows.
    onPodChanged: () => roles.leading.loader?.selectionChanged(),
  });
  const policies = sharedPolicyFeed((t, p) => discover.onPolicy(t, p), feedOptions);
  const discoverInformers: RunningInformer[] = [
    policies.informer,
    nodePodFeed(nodeName, (t, p) => discover.onPod(t, p), feedOptions),
    nodeDataFeed(options.namespace, nodeName, (t, d) => discover.onData(t, d), feedOptions),
  ];
  let ready = false;
  void Promise.all(discoverInformers.map((i) => i.start())).then(() => {
    ready = true;
    discover.markSynced();
  });

  const ctx: AgentContext = { options, feedOptions, writer, discover, policies, state, reconcileObserver };
  let loaderElector: LoaderElector | undefined;
  if (options.roles?.loader !== false) {
    const reportsKernel = createNodeKernelCheck(clients, kernelId, {
      shared: options.sharedKernels === true,
      log: log.child({ role: "loader" }),
    });
    roles.lead(
      "loader",
      (leadership) => {
        loaderElector = byNodeLockAndLease(options, reportsKernel, state, leadership);
        return loaderElector;
      },
      loaderRole(ctx, reportsKernel),
    );
  }
  const armed = createArmedCheck({
    loads: options.roles?.loader !== false,
    nodeName,
    discover,
    loader: () => roles.leading.loader,
    kernelHolder: () => loaderElector?.kernelHolder(),
    loaderFailure: () => state.loaderFailure,
  });
  if (options.roles?.pods !== false)
    roles.lead("pods", (leadership) => byPodsLease(options, leadership), podsRole(ctx));
  roles.startAll();

  return {
    discover,
    loader: () => roles.leading.loader,
    pods: () => roles.leading.pods,
    ready: () => ready,
    loaderFailure: () => state.loaderFailure,
    armed,
    informers: () => discoverInformers,
    async stop(stopOptions = {}) {
      state.detaching = stopOptions.detach === true;
      await roles.stopAll(stopOptions);
      discover.stop();
      await Promise.all(discoverInformers.map((i) => i.stop()));
    },
  };
}

/** The cluster-wide pods role's elector: the `hive-pods` Lease. */
function byPodsLease(options: NodeAgentOptions, leadership: Leadership): RoleElector {
  return new LeaderElector({
    coordination: options.clients.coordination,
    namespace: options.namespace,
    name: PODS_LEASE,
    identity: options.identity,
    ...options.lease, // unset fields: the elector's defaults
    logger: options.log.child({ role: "pods" }),
    ...leadership,
  });
}

/** The loader role's elector: the node lock, then the kernel's Lease (loader-election.ts). */
function byNodeLockAndLease(
  options: NodeAgentOptions,
  reportsKernel: NodeKernelCheck,
  state: AgentState,
  leadership: Leadership,
): LoaderElector {
  return new LoaderElector({
    clients: options.clients,
    nodeReportsKernel: reportsKernel,
    namespace: options.namespace,
    identity: options.identity,
    kernelId: options.kernelId,
    lockPath: options.loaderLock,
    ...(options.loaderLease ? { lease: options.loaderLease } : {}),
    logger: options.log.child({ role: "loader" }),
    onLockUnavailable: (error) => {
      state.loaderFailure = error.describe();
    },
    ...(options.resumable ? { resumable: options.resumable } : {}),
    ...leadership,
  });
}
