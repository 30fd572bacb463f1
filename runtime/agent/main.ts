/**
 * `hive agent`: the DaemonSet's process. Composes configuration, the Kubernetes clients,
 * the container runtime, the kernel program (opened only while this node is its kernel's
 * loader), the alert pipeline and /metrics /healthz /readyz; runs until SIGTERM, then stops
 * the roles, releases the Leases, detaches the kernel program and drains alerts.
 */
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { isHiveError } from "../../api/errors.ts";
import { allowedFileFor } from "../alerts/allowed-counts.ts";
import {
  alertSourceFromHiveData,
  createAlertPipeline,
  createAuthFailureReporter,
  createPodEventRecorder,
  type DestinationOptions,
  watchCallbackSecrets,
} from "../alerts/index.ts";
import { buildInfo } from "../build-info.ts";
import { EXIT } from "../cli/exit-codes.ts";
import type { ArmedData } from "../controllers/live-traps.ts";
import type { NodeTrapError } from "../controllers/ports.ts";
import { createRoutingSnapshotStore, routingSnapshotFileFor } from "../controllers/routing-snapshot.ts";
import { createOriginOf, isCgroupV2Root } from "../discover/cgroup-containers.ts";
import { createContainerRuntime } from "../discover/container-runtime.ts";
import { createFileResolver } from "../discover/file-resolver.ts";
import { createLayerFinder } from "../discover/layer-finder.ts";
import { containerdWritableDirs } from "../discover/writable-layers.ts";
import { createKubeClients, type KubeConfigSource } from "../k8s/kube-client.ts";
import { checkArchitecture } from "../kernel/architecture.ts";
import { DEFAULT_PIN_ROOT } from "../kernel/bpffs.ts";
import type { KernelEvent, KernelWatcher } from "../kernel/contract.ts";
import { PinnedProofMaps } from "../kernel/trap-proof.ts";
import { createLogger, type Logger } from "../log.ts";
import { createHealth, createHiveMetrics, startMetricsServer } from "../metrics/index.ts";
import { WATCH_TABLE_DIR, watchTableFileFor } from "../standalone/watch-table-file.ts";
import { callbackDestinations, callbackSecretNames } from "./callback-destinations.ts";
import { AGENT_USAGE, type AgentConfig, parseAgentConfig, readBootId } from "./config.ts";
import { addNodeAgentReadinessChecks } from "./kernel-readiness.ts";
import { agentIdentity } from "./loader-election.ts";
import { startNodeAgent } from "./node-agent.ts";
import { loaderLockFileFor } from "./node-lock.ts";
import { stopKind } from "./uninstall.ts";
import { type AgentWatchTable, createAgentWatchTable } from "./watch-table.ts";

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
  if (argv.includes("--help") || argv.includes("-h")) {
    process.stdout.write(`${AGENT_USAGE}\n`);
    return 0;
  }
  const base = hooks.log ?? createLogger({ component: "hive-agent" });
  let config: AgentConfig;
  try {
    config = parseAgentConfig(argv);
  } catch (error) {
    base.error("invalid configuration", { error });
    if (isHiveError(error)) process.stderr.write(`hive agent: ${error.describe()}\n`);
    return 2;
  }
  try {
    checkArchitecture();
  } catch (error) {
    base.error("unsupported architecture", { error });
    if (isHiveError(error)) process.stderr.write(`hive agent: ${error.describe()}\n`);
    return EXIT.kernel;
  }
  const log = (hooks.log ?? createLogger({ component: "hive-agent" }, { level: config.logLevel })).child({
    node: config.nodeName,
    pod: config.podName,
  });
  const kernelId = hooks.kernelId ?? readBootId(config.bootIdPath);
  const source: KubeConfigSource = config.server
    ? { url: config.server, ...(config.token ? { token: config.token } : {}) }
    : config.kubeconfig
      ? { kubeconfigPath: config.kubeconfig }
      : {};
  const clients = createKubeClients(source);
  const metrics = createHiveMetrics({ build: buildInfo(config.bpfObject) });
  let destinations: DestinationOptions[] = [];
  /** Why the default callback's credentials are not known yet (alerts to it wait, spooled). */
  let credentialsPending: string | undefined;
  try {
    destinations = await callbackDestinations(config, clients);
  } catch (error) {
    // An agent restarted while the API server is away still watches and spools: the alerts
    // wait for their credentials (watched below), never sent without them.
    credentialsPending = isHiveError(error) ? error.describe() : String(error);
    log.error("cannot read the callback secrets; alerts to the callback wait until they can be read", {
      error,
    });
    destinations = [{ urlPrefix: config.callback as string, pending: credentialsPending }];
  }
  const health = createHealth();
  const alerts = await createAlertPipeline({
    logger: log.child({ component: "alerts" }),
    metrics,
    ...(config.callback ? { defaultCallback: config.callback } : {}),
    tenancy: { platformNamespace: config.namespace, callbacks: config.tenantCallbacks },
    ...(config.spoolDir ? { spool: { dir: config.spoolDir } } : {}),
    delivery: {
      destinations,
      // A callback refusing the credentials (logged by the dispatcher): also a Warning Event on this Pod.
      onAuthFailure: createAuthFailureReporter({
        core: clients.core,
        namespace: config.namespace,
        podName: config.podName,
        nodeName: config.nodeName,
        logger: log.child({ component: "alerts" }),
      }),
    },
    // What the allow lists let through, for `hive status` (written only by the node loading the kernel).
    allowedFile: allowedFileFor(config.pinRoot ?? DEFAULT_PIN_ROOT, config.tableDir),
    // The kernel of this node while it is the loader; the event already carries exe and parent.
    ancestors: (process) => kernel?.ancestors?.(process) ?? [],
    // A Kubernetes Event on the accessed pod per alert (aggregated, rate-limited): `kubectl describe pod`.
    podEvents: createPodEventRecorder({
      core: clients.core,
      nodeName: config.nodeName,
      logger: log.child({ component: "pod-events" }),
      metrics,
    }),
  });
  const secretNames = callbackSecretNames(config);
  const secretWatch =
    secretNames.length === 0
      ? undefined
      : watchCallbackSecrets({
          clients,
          namespace: config.namespace,
          names: secretNames,
          resolve: () => callbackDestinations(config, clients),
          apply: (list) => {
            credentialsPending = undefined;
            alerts.setDestinations(list);
          },
          initial: destinations,
          logger: log.child({ component: "callback-secrets" }),
        });
  const runtime = createContainerRuntime({
    socket: config.runtimeSocket,
    namespaces: config.containerdNamespaces,
    procRoot: config.procRoot,
    // After containerd's task API: CRI answers for runtimes that are not containerd (CRI-O).
    cri: true,
  });
  let kernel: KernelWatcher | undefined;
  /** What `hive status` reads to name this kernel's slots, while this node is its loader. */
  let table: AgentWatchTable | undefined;
  const openKernel =
    hooks.openKernel ??
    // Imported when this node becomes a loader: nodes that never load the program never touch libbpf.
    (async () =>
      (await import("../kernel/open-watcher.ts")).openKernelWatcher({
        attachMode: config.attachMode,
        logger: log.child({ component: "kernel" }),
        // Loaders hold the node-local lock: pins of another version are nobody's but an old agent's.
        replaceStalePins: true,
        ...(config.pinRoot ? { pinRoot: config.pinRoot } : {}),
        ...(config.bpfObject ? { objectPath: config.bpfObject } : {}),
        ...(config.watchCapacity ? { watchCapacity: config.watchCapacity } : {}),
        ...(config.burstGapMs ? { burstGapMs: config.burstGapMs } : {}),
      }));
  // The same for every event; callback, allow list and policy namespace come from each live trap.
  const sourceContext = {
    nodeName: config.nodeName,
    kernelId,
    ...(config.clusterName ? { clusterName: config.clusterName } : {}),
  };
  const onAccess = (event: KernelEvent, matched: readonly ArmedData[]) => {
    for (const { data, trap } of matched)
      alerts.handle(event, alertSourceFromHiveData(data, trap, sourceContext));
  };
  const pinRoot = config.pinRoot ?? DEFAULT_PIN_ROOT;
  // Every trap proven with the maps pinned for this node's kernel before it is armed (part of
  // the kernel boundary: a replaced kernel has no maps to prove with).
  const resolver = createFileResolver(runtime, config.procRoot, {
    timeoutMs: config.resolveTimeoutMs,
    ...(hooks.openKernel || !config.trapProof ? {} : { proofPinRoot: pinRoot }),
  });
  metrics.observeResolver(() => resolver.stats?.() ?? { stuck: 0, timeouts: 0 });
  /** This node's latest trap errors: the watch table lists them as not armed. */
  let trapErrors: readonly NodeTrapError[] = [];
  const routingSnapshot = createRoutingSnapshotStore(
    routingSnapshotFileFor(pinRoot, config.tableDir ?? WATCH_TABLE_DIR),
    kernelId,
    log.child({ component: "routing-snapshot" }),
  );
  // Traps armed on image layers' files before containers start; accesses named by their cgroup.
  let onLayersChanged = () => {};
  const imageLayers =
    config.imageLayers && isCgroupV2Root(config.cgroupRoot) ? config.imageLayers : undefined;
  if (config.imageLayers && !imageLayers)
    log.warn("traps are not armed in the image layers: the node's cgroups are not cgroup v2", {
      cgroupRoot: config.cgroupRoot,
      hint: "an access to a layer's file could not be told to a container; traps are armed per running container",
    });
  const layers = imageLayers
    ? createLayerFinder({
        snapshotsDir: imageLayers,
        ...(hooks.openKernel || !config.trapProof ? {} : { proofs: new PinnedProofMaps(pinRoot) }),
        log: log.child({ component: "image-layers" }),
        onChange: () => onLayersChanged(),
        // Containers' writable layers sit beside the image's: containerd says which they are.
        writable: containerdWritableDirs({ socket: config.runtimeSocket }),
      })
    : undefined;
  // Armed from the first pass only once containerd said which directories are images' layers.
  await layers?.ready;
  const originOf = imageLayers
    ? createOriginOf({
        cgroupRoot: config.cgroupRoot,
        runtimeStateDir: config.runtimeStateDir ?? dirname(config.runtimeSocket),
        namespaces: config.containerdNamespaces,
      })
    : undefined;
  const agent = await startNodeAgent({
    ...(layers ? { layers } : {}),
    ...(originOf ? { originOf } : {}),
    routingSnapshot,
    // A restart on a node whose program is pinned: resumed from the pins and the snapshot at once.
    resumable: () => existsSync(join(pinRoot, "hive_watch")) && routingSnapshot.load() !== undefined,
    clients,
    nodeName: config.nodeName,
    identity: agentIdentity(config.nodeName, config.podName),
    namespace: config.namespace,
    kernelId,
    resolver,
    openKernel: async () => {
      kernel = await openKernel();
      // Events keep their ring space until their alerts are on disk or delivered.
      kernel.gateRelease?.(alerts.ringGate());
      metrics.observeKernel(() => kernel?.counters() ?? { events: 0n, lost: 0n, watched: 0 });
      table = createAgentWatchTable({
        file: watchTableFileFor(pinRoot, config.tableDir),
        kernelId,
        attachMode: kernel.attachMode,
        ...(kernel.attachReason ? { attachReason: kernel.attachReason } : {}),
        logger: log.child({ component: "watch-table" }),
      });
      table.unarmed(trapErrors);
      return kernel;
    },
    loaderLock: loaderLockFileFor(pinRoot, config.tableDir ?? WATCH_TABLE_DIR),
    onKernelSynced: (entries, dataOf) => table?.synced(entries, dataOf),
    onTrapErrors: (errors) => {
      trapErrors = errors;
      table?.unarmed(errors);
    },
    observeReconcile: (controller, seconds) => metrics.reconcileDuration.observe({ controller }, seconds),
    podsUncoveredGauge: metrics.podsUncovered,
    onEventDropped: (reason) => metrics.kernelEventsDropped.inc({ reason }),
    onAccess,
    log,
    roles: config.roles,
    lease: config.lease,
    ...(config.reports !== "none"
      ? { reports: { format: config.reports, failWindowMs: config.reportFailWindowHours * 3_600_000 } }
      : {}),
  });
  onLayersChanged = () => agent.discover.onLayersChanged();
  addNodeAgentReadinessChecks(health, agent, () => kernel);
  health.addReadinessCheck("alert-spool", () => alerts.health());
  health.addReadinessCheck("callback-credentials", () =>
    credentialsPending === undefined
      ? { ok: true }
      : { ok: false, message: `the callback's Secrets are not read yet: ${credentialsPending}` },
  );
  health.addLivenessCheck("event-loop", () => true);
  metrics.observeReadiness(async () => (await health.readiness()).ok);
  const server = await startMetricsServer({
    registry: metrics.registry,
    health,
    port: config.metricsPort,
    logger: log,
  });
  log.info("agent started", { kernelId, metrics: server.url, roles: config.roles });
  hooks.onStarted?.({ metricsUrl: server.url, config });

  const reason = await (hooks.until ?? untilSignal());
  log.info("shutting down", { reason: String(reason) });
  // An uninstall takes the kernel program away; a restart leaves it attached for the next agent.
  const kind = await stopKind(clients.kubeConfig, config.namespace, config.daemonSet);
  log.info(
    kind.uninstall ? "uninstalled: detaching the kernel program" : "keeping the kernel program attached",
    {
      why: kind.why,
    },
  );
  // Roles first (the loader closes the kernel program), then Leases are released inside stop().
  await agent.stop({ detach: kind.uninstall });
  layers?.close();
  await table?.idle();
  await routingSnapshot.idle();
  await secretWatch?.stop();
  runtime.close();
  await alerts.close({ drainMs: 5000 });
  await server.close();
  log.info("agent stopped");
  return 0;
}
