/**
 * One node's agent, composed: discover always runs; the loader role runs where this agent
 * holds its node's lock and its kernel's Lease (loader-election.ts: an API-server outage never
 * ends it), the pods role where it holds the cluster-wide Lease (`hive-pods`). A role's
 * informers and controller live exactly as long as its leadership.
 * main.ts adds flags, signals and the HTTP endpoints; tests and the benchmark start several
 * of these in one process, one per simulated node.
 */

import { isHiveError } from "../../api/errors.ts";
import { LABEL_MANAGED_BY, LABEL_NODE, LABEL_POLICY, MANAGED_BY } from "../../api/meta.ts";
import type { HivePolicy } from "../../api/policy.ts";
import type { ReportFormat } from "../../api/report.ts";
import { watchCoverage } from "../controllers/coverage-feeds.ts";
import {
  createDiscoverController,
  type DiscoverController,
  type LayerFinder,
} from "../controllers/discover.ts";
import {
  allDataFeed,
  type FeedOptions,
  kernelDataFeed,
  nodeDataFeed,
  nodePodFeed,
  policyFeed,
  trapErrorFeed,
} from "../controllers/feeds.ts";
import {
  createDataWriter,
  createPolicyWriter,
  createTrapErrorReporter,
  trapErrorFromEvent,
} from "../controllers/kube-ports.ts";
import type { AttributeAccess } from "../controllers/layer-routing.ts";
import { createLoaderController, type LoaderController, type LoaderOptions } from "../controllers/loader.ts";
import { createPodsController, type PodsController, type PodsUncoveredGauge } from "../controllers/pods.ts";
import {
  type NodeTrapError,
  objectKey,
  type TrapErrorReporter,
  type WatchEventType,
} from "../controllers/ports.ts";
import type { RoutingSnapshotStore } from "../controllers/routing-snapshot.ts";
import type { OriginOf } from "../discover/cgroup-containers.ts";
import type { FileResolver } from "../discover/file-resolver.ts";
import { isNotFound } from "../k8s/api-errors.ts";
import type { InformerStats } from "../k8s/informer.ts";
import type { KubeClients } from "../k8s/kube-client.ts";
import { type LeaderElectionOptions, LeaderElector, type LeaseTiming } from "../k8s/lease.ts";
import type { KernelWatcher } from "../kernel/contract.ts";
import type { Logger } from "../log.ts";
import { startReportFeeds } from "../reports/report-feeds.ts";
import { createNodeKernelCheck, createNodeOwner, guardKernelData } from "./kernel-nodes.ts";
import { LoaderElector } from "./loader-election.ts";
import type { RoleElector } from "./node-lock.ts";

/** What the agent needs of any informer, whatever its object type. */
export interface RunningInformer {
  start(): Promise<void>;
  stop(): Promise<void>;
  readonly stats: InformerStats;
}

export interface NodeAgentOptions {
  clients: KubeClients;
  nodeName: string;
  /** This agent's identity in elections (the pod name). */
  identity: string;
  /** Namespace of the Leases (the agent's own namespace). */
  namespace: string;
  kernelId: string;
  resolver: FileResolver;
  /** The node's image layers: traps armed there before containers start (discover). */
  layers?: LayerFinder;
  /** The container of an access by its cgroup (accesses to image layers' files). */
  originOf?: OriginOf;
  /** Opens the kernel program when this node becomes its kernel's loader. */
  openKernel: () => Promise<KernelWatcher>;
  onAccess: LoaderOptions["onAccess"];
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
  const writer = createDataWriter(clients.custom);
  const reconcileObserver =
    (controller: "discover" | "loader" | "pods") =>
    (seconds: number): void =>
      options.observeReconcile?.(controller, seconds);
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
    // A file re-resolved here is armed by this agent's loader (when it is the kernel's) at once:
    // the watch of the written HiveData brings the same object again later.
    onDesired: (d) => leading.loader?.onData("MODIFIED", d),
    // Accesses an image layer's file attributes to a pod are selected by what the pod cache shows.
    onPodChanged: () => leading.loader?.selectionChanged(),
  });
  // One policy watch per node, shared by every role: a role subscribes while it runs.
  const policySinks = new Set<(type: WatchEventType, policy: HivePolicy) => void>();
  const policyInformer = policyFeed((t, p) => {
    discover.onPolicy(t, p);
    for (const sink of policySinks) sink(t, p);
  }, feedOptions);
  const sharedPolicies = (sink: (type: WatchEventType, policy: HivePolicy) => void): RunningInformer => {
    let stopped = false;
    return {
      stats: policyInformer.stats,
      async start() {
        await policyInformer.start();
        if (stopped) return; // the role ended while the shared watch synced
        // Replay and subscribe in one synchronous step: no event can fall between them.
        for (const p of policyInformer.list()) sink("ADDED", p);
        policySinks.add(sink);
      },
      async stop() {
        stopped = true;
        policySinks.delete(sink);
      },
    };
  };
  const discoverInformers: RunningInformer[] = [
    policyInformer,
    nodePodFeed(nodeName, (t, p) => discover.onPod(t, p), feedOptions),
    nodeDataFeed(options.namespace, nodeName, (t, d) => discover.onData(t, d), feedOptions),
  ];
  const all: RunningInformer[] = [...discoverInformers];
  let ready = false;
  void Promise.all(discoverInformers.map((i) => i.start())).then(() => {
    ready = true;
    discover.markSynced();
  });

  const electors: RoleElector[] = [];
  // The controllers of the roles this node leads now.
  const leading: { loader?: LoaderController | undefined; pods?: PodsController | undefined } = {};
  type Leadership = Pick<LeaderElectionOptions, "onStartedLeading" | "onStoppedLeading">;
  /** Runs a role while this node leads it: `start` makes its controller and informers (undefined: none this term). */
  const leadRole = <K extends keyof typeof leading>(
    role: K,
    elect: (leadership: Leadership) => RoleElector,
    start: (signal: AbortSignal) => Promise<
      | {
          controller: NonNullable<(typeof leading)[K]>;
          informers: RunningInformer[];
          close?: () => Promise<void>;
        }
      | undefined
    >,
  ): void => {
    let stopRole: (() => Promise<void>) | undefined;
    electors.push(
      elect({
        onStartedLeading: async (signal) => {
          const started = await start(signal);
          if (!started) return;
          const { controller, informers, close } = started;
          stopRole = async () => {
            // The kernel first: the ring worker's last batch reaches the listeners while the
            // controller still routes events (stopped first, it would drop them as unmatched).
            await close?.();
            controller.stop();
            await Promise.all(informers.map((i) => i.stop()));
            if (leading[role] === controller) leading[role] = undefined;
          };
          if (signal.aborted) return;
          leading[role] = controller;
          await Promise.all(informers.map((i) => i.start()));
          if (!signal.aborted) controller.markSynced();
        },
        onStoppedLeading: async () => {
          const stop = stopRole;
          stopRole = undefined;
          await stop?.();
        },
      }),
    );
  };

  let loaderFailure: string | undefined;
  /** Set by stop({ detach: true }): the loader's close then unpins and detaches the program. */
  let detaching = false;
  const byPodsLease = (leadership: Leadership): RoleElector =>
    new LeaderElector({
      coordination: clients.coordination,
      namespace: options.namespace,
      name: PODS_LEASE,
      identity: options.identity,
      ...options.lease, // unset fields: the elector's defaults
      logger: log.child({ role: "pods" }),
      ...leadership,
    });
  const reportsKernel = createNodeKernelCheck(clients, kernelId);
  const byNodeLockAndLease = (leadership: Leadership): RoleElector =>
    new LoaderElector({
      clients,
      nodeReportsKernel: reportsKernel,
      namespace: options.namespace,
      identity: options.identity,
      kernelId,
      lockPath: options.loaderLock,
      ...(options.loaderLease ? { lease: options.loaderLease } : {}),
      logger: log.child({ role: "loader" }),
      onLockUnavailable: (error) => {
        loaderFailure = error.describe();
      },
      ...(options.resumable ? { resumable: options.resumable } : {}),
      ...leadership,
    });

  if (options.roles?.loader !== false) {
    leadRole("loader", byNodeLockAndLease, async (signal) => {
      let kernel: KernelWatcher;
      try {
        kernel = await options.openKernel();
        loaderFailure = undefined;
      } catch (error) {
        // The kernel refuses the program (no BTF, no kprobes, no privileges): the same on every node of
        // this kernel, so the Lease is kept and the failure is reported by readiness and the log.
        loaderFailure = isHiveError(error) ? error.describe() : String(error);
        log.error("cannot load the kernel program; this kernel's files are not watched", { error });
        return undefined;
      }
      if (signal.aborted) {
        // Leadership ended while the program loaded: onStoppedLeading has run already, so close here.
        await kernel.close({ keepPinned: true });
        return undefined;
      }
      const controller = createLoaderController({
        kernelId,
        nodeName,
        kernel,
        writer,
        log: log.child({ controller: "loader" }),
        onAccess: options.onAccess,
        // This node's HiveData is re-resolved by this agent's discover, in memory; other nodes'
        // (sharing this kernel) through the API server.
        resolveLocally: (d) => {
          if (d.metadata.labels?.[LABEL_NODE] !== nodeName) return false;
          discover.resolveNow(`${d.metadata.name} changed`);
          return true;
        },
        ...(options.onKernelSynced ? { onSynced: options.onKernelSynced } : {}),
        ...(options.onEventDropped ? { onEventDropped: options.onEventDropped } : {}),
        ...(options.observeReconcile ? { observeReconcile: reconcileObserver("loader") } : {}),
        ...(options.orphanGraceMs !== undefined ? { orphanGraceMs: options.orphanGraceMs } : {}),
        ...(options.routingSnapshot ? { snapshot: options.routingSnapshot } : {}),
        platformNamespace: options.namespace,
        ...(options.originOf ? { attribute: attributeWith(options.originOf, discover) } : {}),
      });
      const informers: RunningInformer[] = [
        sharedPolicies((t, p) => controller.onPolicy(t, p)),
        kernelDataFeed(
          options.namespace,
          kernelId,
          guardKernelData(nodeName, reportsKernel, (t, d) => controller.onData(t, d), log),
          feedOptions,
        ),
      ];
      // The role ends only when the agent stops (a restart, an update): the program stays
      // attached and pinned, its events wait in the ring buffer for the next agent, and the
      // watch table still names its slots for `hive status`.
      const close = () => kernel.close({ keepPinned: !detaching });
      return { controller, informers, close };
    });
  }

  if (options.roles?.pods !== false) {
    leadRole("pods", byPodsLease, async () => {
      let controller: PodsController | undefined;
      const feeds = options.reports
        ? startReportFeeds({
            ...options.reports,
            feedOptions,
            log: log.child({ controller: "reports" }),
            nodeName,
            platformNamespace: options.namespace,
            onInput: () => controller?.onReportInput(),
          })
        : undefined;
      const coverage = watchCoverage(options.namespace, () => controller?.onCoverage(), {
        ...feedOptions,
        ...(options.uncoveredGraceMs !== undefined ? { graceMs: options.uncoveredGraceMs } : {}),
      });
      controller = createPodsController({
        nodeName,
        platformNamespace: options.namespace,
        uncoveredPods: () => coverage.pods(),
        ...(options.podsUncoveredGauge ? { podsUncoveredGauge: options.podsUncoveredGauge } : {}),
        ...(feeds ? { reports: feeds.reports } : {}),
        writer,
        policyWriter: createPolicyWriter(clients.custom),
        log: log.child({ controller: "pods" }),
        ...(options.observeReconcile ? { observeReconcile: reconcileObserver("pods") } : {}),
        removeErrorReports: async (policy) => {
          const ns = policy.metadata.namespace ?? "default";
          const events = await clients.core.listNamespacedEvent({
            namespace: ns,
            labelSelector: `${LABEL_MANAGED_BY}=${MANAGED_BY},${LABEL_POLICY}=${policy.metadata.name}`,
          });
          for (const ev of events.items) {
            const name = ev.metadata?.name ?? "";
            // A report that cannot be removed expires with the Event TTL; the policy goes on.
            await clients.core.deleteNamespacedEvent({ namespace: ns, name }).catch((error: unknown) => {
              if (!isNotFound(error))
                log.warn("could not remove a trap-error report", { event: `${ns}/${name}`, error });
            });
          }
        },
      });
      const informers: RunningInformer[] = [
        sharedPolicies((t, p) => controller.onPolicy(t, p)),
        allDataFeed(options.namespace, (t, d) => controller.onData(t, d), feedOptions),
        trapErrorFeed(
          (t, ev) => controller.onTrapError(t, objectKey(ev), trapErrorFromEvent(ev)),
          feedOptions,
        ),
        coverage,
      ];
      return { controller, informers, ...(feeds ? { close: () => feeds.stop() } : {}) };
    });
  }
  for (const e of electors) e.start();

  return {
    discover,
    loader: () => leading.loader,
    pods: () => leading.pods,
    ready: () => ready,
    loaderFailure: () => loaderFailure,
    informers: () => all,
    async stop(stopOptions = {}) {
      detaching = stopOptions.detach === true;
      await Promise.all(electors.map((e) => e.stop(stopOptions)));
      discover.stop();
      await Promise.all(discoverInformers.map((i) => i.stop()));
    },
  };
}

/**
 * An access's container, named by this node: its cgroup, then the pod by uid from discover's
 * cache (this node's pods only: another node's container sharing this kernel is not known here).
 */
function attributeWith(originOf: OriginOf, discover: DiscoverController): AttributeAccess {
  return (event) => {
    const origin = originOf(event.cgroupId, event.ktimeNs, event.cgroupNames);
    if (!origin) return origin;
    const pod = discover.podByUid(origin.podUid);
    // A kubelet's container of a pod not listed yet (the pod list not in after a restart): it waits.
    if (!pod) return "pod-unknown";
    return {
      pod,
      containerId: origin.containerId,
      scheme: origin.scheme,
      containerName: origin.containerName,
    };
  };
}
