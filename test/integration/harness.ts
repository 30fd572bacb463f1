/**
 * Controller tests against a real kube-apiserver (etcd and kube-controller-manager behind it, the
 * fault proxy in front: test/cluster/) with Hive installed from the component's own rendering,
 * through the real @kubernetes/client-node: simulated nodes each run the real agent composition
 * (runtime/agent/node-agent.ts), authenticating with real ServiceAccount tokens bound to their
 * Pods on their Nodes, under the RBAC and admission policies the component renders. Two
 * boundaries are replaced, and only those: the container runtime (containers are real
 * directories under a fake /proc, resolved by the real safe-path code; test/containers/
 * covers real containerd) and the kernel (a KernelWatcher that records what it is told
 * to watch and lets a test emit events; the libbpf loader is tested in the kernel suite).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  AppsV1Api,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  type V1Pod,
} from "@kubernetes/client-node";
import type { HiveData } from "../../api/data.ts";
import { HiveError } from "../../api/errors.ts";
import {
  API_VERSION,
  GROUP,
  KIND_DATA,
  KIND_POLICY,
  LABEL_NODE,
  PLURAL_DATA,
  PLURAL_POLICY,
  VERSION,
} from "../../api/meta.ts";
import type { HivePolicy, HiveTrap } from "../../api/policy.ts";
import type { HiveMonitorArgs } from "../../component/args.ts";
import { agentIdentity } from "../../runtime/agent/loader-election.ts";
import { type NodeAgent, type NodeAgentOptions, startNodeAgent } from "../../runtime/agent/node-agent.ts";
import { alertSourceFromHiveData } from "../../runtime/alerts/alert-source.ts";
import type { AlertPipeline } from "../../runtime/alerts/pipeline.ts";
import type { LiveTrap } from "../../runtime/controllers/live-traps.ts";
import type { ContainerRuntime } from "../../runtime/discover/container-runtime.ts";
import { createFileResolver } from "../../runtime/discover/file-resolver.ts";
import { createKubeClients } from "../../runtime/k8s/kube-client.ts";
import type {
  AllowedCount,
  AllowRule,
  DenyState,
  KernelCounters,
  KernelEvent,
  KernelWatcher,
  SyncResult,
  WatchEntry,
} from "../../runtime/kernel/contract.ts";
import { createLogger } from "../../runtime/log.ts";
import { AuditLog } from "../cluster/audit-log.ts";
import { WITHOUT_KUBELET_CONTROLLERS } from "../cluster/controllers.ts";
import {
  type FaultRule,
  matchesFilter,
  type RequestFilter,
  type RequestRecord,
} from "../cluster/fault-proxy.ts";
import { type Installed, installHive } from "../cluster/install.ts";
import { type RealApi, startRealApi } from "../cluster/real-api.ts";
import { setPodRunning, waitFor } from "../cluster/testing.ts";

export const AGENT_NS = "hive-system";
export const POLICY_NS = "hive-system";

/** Records sync() calls; `emit` delivers an event as the ring buffer would. */
export class RecordingKernel implements KernelWatcher {
  readonly attachMode = "kprobe" as const;
  entries: WatchEntry[] = [];
  /** The allow rules of the last sync. */
  allow: AllowRule[] = [];
  /** What takeAllowed hands out next (a test sets it as the kernel would count). */
  allowedQueue: AllowedCount[] = [];
  /** Every `major:minor:ino` of a file entry any sync asked to watch. */
  everWatched = new Set<string>();
  syncs = 0;
  closed = false;
  /** Closed with `keepPinned` (left attached for the next agent). */
  keptPinned = false;
  private listeners: ((e: KernelEvent) => void)[] = [];
  sync(entries: readonly WatchEntry[], allow: readonly AllowRule[] = []): SyncResult {
    if (this.closed) throw new Error("sync after close");
    this.entries = [...entries];
    this.allow = [...allow];
    for (const e of entries)
      if (e.kind === "file") this.everWatched.add(`${e.key.major}:${e.key.minor}:${e.key.ino}`);
    this.syncs += 1;
    return { notWatched: [] };
  }
  onEvent(listener: (event: KernelEvent) => void): void {
    this.listeners.push(listener);
  }
  takeAllowed(): AllowedCount[] {
    const taken = this.allowedQueue;
    this.allowedQueue = [];
    return taken;
  }
  /** Why this kernel cannot deny (KernelWatcher.denyState); undefined: it can. */
  denyUnavailable: string | undefined;
  denyState(): DenyState {
    return this.denyUnavailable === undefined
      ? { available: true, attached: this.entries.some((e) => e.deny !== undefined), mechanism: "fmod_ret" }
      : { available: false, reason: this.denyUnavailable };
  }
  /** Holds on consuming events not yet released (KernelWatcher.holdAcks). */
  holds = 0;
  holdAcks(): () => void {
    this.holds += 1;
    let released = false;
    return () => {
      if (!released) this.holds -= 1;
      released = true;
    };
  }
  /** What the ring buffer could not take (a test sets it as the kernel would count it). */
  lost = 0n;
  counters(): KernelCounters {
    return { events: 0n, lost: this.lost, watched: this.entries.length };
  }
  /** Runs inside close(), as the ring drain's last read does: events it emits are the last ones. */
  onClose?: (kernel: RecordingKernel) => void;
  async close(options: { keepPinned?: boolean } = {}): Promise<void> {
    this.onClose?.(this);
    this.closed = true;
    this.keptPinned = options.keepPinned === true;
  }
  /** As the kernel writes it: the event carries the key of the entry that matched (given `slot`). */
  emit(partial: Partial<KernelEvent> & Pick<KernelEvent, "slot" | "kind">): void {
    const event: KernelEvent = {
      ktimeNs: 1n,
      key: this.entries.find((e) => e.slot === partial.slot)?.key ?? { major: 0, minor: 0, ino: 0n },
      mask: 4,
      accesses: ["read"],
      pid: 1,
      tgid: 1,
      uid: 0,
      gid: 0,
      comm: "cat",
      cgroupId: 0n,
      count: 1,
      process: { exe: { exe: "/usr/bin/cat", source: "exec" }, execNs: 1n },
      ...partial,
    };
    for (const l of this.listeners) l(event);
  }
}

/** Containers as directories: <proc>/<pid>/root is the container's root filesystem. */
export class FakeContainers implements ContainerRuntime {
  readonly proc: string;
  private pids = new Map<string, number>();
  private next = 1000;
  constructor(base: string) {
    this.proc = join(base, "proc");
    mkdirSync(this.proc, { recursive: true });
  }
  /** Creates a running container with the given files; returns its containerID as a pod status carries it. */
  add(id: string, files: Record<string, string> = { "etc/shadow": "root:*:1::::::\n" }): string {
    const pid = this.next++;
    const root = this.root(pid);
    mkdirSync(root, { recursive: true });
    // As the kubelet's containerd names it: discover checks the process is still the container's.
    writeFileSync(
      join(this.proc, String(pid), "cgroup"),
      `0::/kubepods.slice/kubepods-besteffort.slice/cri-containerd-${id}.scope\n`,
    );
    for (const [p, content] of Object.entries(files)) {
      mkdirSync(join(root, p, ".."), { recursive: true });
      writeFileSync(join(root, p), content);
    }
    this.pids.set(id, pid);
    return `containerd://${id}`;
  }
  rootOf(id: string): string {
    const pid = this.pids.get(id);
    if (pid === undefined) throw new Error(`no container ${id}`);
    return this.root(pid);
  }
  /** What `sed -i` does: write a new file and rename it over the old one. */
  replaceByRename(id: string, path: string, content: string): void {
    const target = join(this.rootOf(id), path);
    writeFileSync(`${target}.tmp`, content);
    renameSync(`${target}.tmp`, target);
  }
  private root(pid: number): string {
    return join(this.proc, String(pid), "root");
  }
  async findProcess(containerId: string) {
    const id = containerId.replace(/^[a-z]+:\/\//, "");
    const pid = this.pids.get(id);
    if (pid === undefined) throw new HiveError("ContainerNotReady", "container not running", { object: id });
    return { pid, source: "cgroup" as const };
  }
  close(): void {}
}

export interface SimNode {
  name: string;
  kernelId: string;
  agent: NodeAgent;
  kernels: RecordingKernel[];
  /** Each access the loader routed: the HiveData it matched and their live traps. */
  accesses: { event: KernelEvent; matched: readonly HiveData[]; traps: readonly LiveTrap[] }[];
  /** The kernel this node's loader has open now, if it is the loader. */
  activeKernel(): RecordingKernel | undefined;
}

/**
 * Leases short enough for failover tests, long enough that a renewal answered late by a real API
 * server on a busy machine (hundreds of milliseconds) does not end a role at its renew deadline.
 */
export const FAST_LEASE = { leaseDurationMs: 3000, renewDeadlineMs: 2000, retryPeriodMs: 400 };

const mergePatch = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

/** Answers a test must declare when it provokes them on purpose: the server refused the request. */
const REFUSED = new Set([401, 403, 422]);

export interface HiveApiOptions {
  /**
   * The ValidatingAdmissionPolicies the component renders (default on). A test file turns them
   * off only with the reason it must (`off: "why"`): it then installs with `admissionPolicy: false`,
   * as on a cluster older than Kubernetes 1.30.
   */
  admission?: true | { off: string };
  /** RealApi's watch cache (default on); off, a compaction makes watches from older revisions fail with 410. */
  watchCache?: boolean;
  /** More of the monitor's options the installation is rendered with (e.g. `reports`). */
  monitor?: Partial<HiveMonitorArgs>;
}

/**
 * One test file's control plane: a real kube-apiserver (etcd, kube-controller-manager) behind
 * the fault proxy, with Hive installed from the component's own rendering by the real kubectl.
 * Each test starts a Cluster on it; the Cluster's stop() returns it to this state.
 */
export interface HiveApi {
  readonly api: RealApi;
  readonly installed: Installed;
  stop(): Promise<void>;
}

/** A namespace's `default` ServiceAccount exists: the ServiceAccount admission plugin refuses pods before it. */
async function waitForDefaultServiceAccount(core: CoreV1Api, namespace: string): Promise<void> {
  await eventually(
    () => core.readNamespacedServiceAccount({ name: "default", namespace }).then(() => true),
    `the default ServiceAccount of ${namespace}`,
    30_000,
  );
}

export async function startHiveApi(options: HiveApiOptions = {}): Promise<HiveApi> {
  // No kubelet runs here: the agents' Pods are the tests' own (installed.agentToken), and the
  // DaemonSet controller would adopt them and delete them from Nodes the DaemonSet does not select.
  const api = await startRealApi({
    controllers: WITHOUT_KUBELET_CONTROLLERS,
    ...(options.watchCache === false ? { watchCache: false } : {}),
  });
  try {
    const installed = installHive(api.cp, {
      image: "hive:test",
      namespace: AGENT_NS,
      ...(options.admission === undefined || options.admission === true ? {} : { admissionPolicy: false }),
      ...options.monitor,
    });
    const kc = api.cp.adminKubeConfig();
    await waitForDefaultServiceAccount(kc.makeApiClient(CoreV1Api), "default");
    // A CRD just Established may still answer 429 "storage is (re)initializing" for a moment.
    const custom = kc.makeApiClient(CustomObjectsApi);
    await eventually(
      async () => {
        for (const plural of [PLURAL_POLICY, PLURAL_DATA])
          await custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural });
        return true;
      },
      "Hive's custom resources served",
      30_000,
    );
    if (options.admission === undefined || options.admission === true)
      await waitForAdmissionPolicies(api, installed.agentUser);
    return { api, installed, stop: () => api.stop() };
  } catch (err) {
    await api.stop();
    throw err;
  }
}

/**
 * kube-apiserver enforces a ValidatingAdmissionPolicy only once it has loaded it, a moment after
 * it was created: until each of the rendered policies refuses what it must (dry runs, so nothing
 * is written), a test's attack would meet no admission at all.
 */
async function waitForAdmissionPolicies(api: RealApi, agentUser: string): Promise<void> {
  const admin = api.kubeConfig().makeApiClient(CustomObjectsApi);
  // The agent's user without a pod-bound token's node claim (impersonated): the node scope refuses it.
  const agent = api.kubeConfig(agentUser).makeApiClient(CustomObjectsApi);
  const data = {
    apiVersion: API_VERSION,
    kind: KIND_DATA,
    metadata: { name: "admission-probe", labels: { [LABEL_NODE]: "admission-probe" } },
    spec: {
      "inode-no": "1",
      "kernel-id": "00000000-0000-4000-8000-000000000000",
      device: { major: 0, minor: 1 },
      accesses: ["read"],
    },
  };
  const policy = {
    apiVersion: API_VERSION,
    kind: KIND_POLICY,
    metadata: { name: "admission-probe" },
    spec: { traps: [{ path: "/etc/shadow", match: { namespace: "kube-system" } }] },
  };
  const crd = { group: GROUP, version: VERSION, dryRun: "All" };
  const probes = [
    // hive-agent-only-writes: HiveData from anyone but the agent.
    () =>
      admin.createNamespacedCustomObject({ ...crd, namespace: AGENT_NS, plural: PLURAL_DATA, body: data }),
    // hive-agent-node-scope: an agent request that names no node.
    () =>
      agent.createNamespacedCustomObject({ ...crd, namespace: AGENT_NS, plural: PLURAL_DATA, body: data }),
    // hive-tenant-scope: a tenant's policy reaching another namespace.
    () =>
      admin.createNamespacedCustomObject({
        ...crd,
        namespace: "default",
        plural: PLURAL_POLICY,
        body: policy,
      }),
  ];
  await eventually(
    async () => {
      for (const probe of probes) {
        const code = await probe().then(
          () => 200,
          (err: unknown) => (err as { code?: number }).code,
        );
        if (code !== 403) return false;
      }
      return true;
    },
    "the rendered admission policies enforced",
    60_000,
  );
}

/** Ignores a 404 (already gone) and a 409 (changed meanwhile: the next pass sees it again). */
const gone = (err: unknown) => {
  const code = (err as { code?: number }).code;
  if (code !== 404 && code !== 409) throw err;
};

/**
 * What the tests of a file leave behind, deleted by the admin directly (not through the proxy):
 * HivePolicies (finalizers stripped: no agent runs to remove its own), HiveData, ReplicaSets, Pods
 * (at once: no kubelet finishes a graceful deletion), Leases, Events and Nodes. Namespaces, RBAC
 * objects and ServiceAccounts stay (tests create them idempotently).
 */
async function deleteTestObjects(api: RealApi): Promise<void> {
  const kc = api.cp.adminKubeConfig();
  const core = kc.makeApiClient(CoreV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const coordination = kc.makeApiClient(CoordinationV1Api);
  const crd = { group: GROUP, version: VERSION };
  const policies = (await custom.listClusterCustomObject({ ...crd, plural: PLURAL_POLICY })) as {
    items: HivePolicy[];
  };
  for (const p of policies.items) {
    const ref = {
      ...crd,
      plural: PLURAL_POLICY,
      namespace: p.metadata.namespace ?? "",
      name: p.metadata.name ?? "",
    };
    await custom
      .patchNamespacedCustomObject({ ...ref, body: { metadata: { finalizers: null } } }, mergePatch)
      .catch(gone);
    await custom.deleteNamespacedCustomObject(ref).catch(gone);
  }
  const data = (await custom.listClusterCustomObject({ ...crd, plural: PLURAL_DATA })) as {
    items: HiveData[];
  };
  for (const namespace of new Set(data.items.map((d) => d.metadata.namespace ?? "")))
    await custom.deleteCollectionNamespacedCustomObject({ ...crd, plural: PLURAL_DATA, namespace });
  // Pods' controllers first, or they make them again.
  const apps = kc.makeApiClient(AppsV1Api);
  const replicaSets = await apps.listReplicaSetForAllNamespaces();
  for (const namespace of new Set(replicaSets.items.map((r) => r.metadata?.namespace ?? "")))
    await apps.deleteCollectionNamespacedReplicaSet({ namespace });
  const pods = await core.listPodForAllNamespaces();
  for (const namespace of new Set(pods.items.map((p) => p.metadata?.namespace ?? "")))
    await core.deleteCollectionNamespacedPod({ namespace, gracePeriodSeconds: 0 });
  await coordination.deleteCollectionNamespacedLease({ namespace: AGENT_NS });
  const events = await core.listEventForAllNamespaces();
  for (const namespace of new Set(events.items.map((e) => e.metadata?.namespace ?? "")))
    await core.deleteCollectionNamespacedEvent({ namespace });
  await core.deleteCollectionNode();
}

/** The file's cluster as startHiveApi left it, for the next test. */
async function resetCluster(api: RealApi): Promise<void> {
  // Retried whole (every step is idempotent): a busy server may answer one of them 429 or 5xx.
  await eventually(
    async () => {
      await deleteTestObjects(api);
      return true;
    },
    "the tests' objects deleted",
    30_000,
  );
  const kc = api.cp.adminKubeConfig();
  const core = kc.makeApiClient(CoreV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const crd = { group: GROUP, version: VERSION };
  await eventually(
    async () => {
      const [p, q, n] = await Promise.all([
        core.listPodForAllNamespaces(),
        custom.listClusterCustomObject({ ...crd, plural: PLURAL_POLICY }) as Promise<{ items: unknown[] }>,
        core.listNode(),
      ]);
      return p.items.length + q.items.length + n.items.length === 0;
    },
    "the cluster emptied for the next test",
    30_000,
  );
}

export class Cluster {
  api!: RealApi;
  admin!: { core: CoreV1Api; custom: CustomObjectsApi };
  containers!: FakeContainers;
  nodes: SimNode[] = [];
  installed!: Installed;
  private base = "";
  private podSeq = 0;
  private containerSeq = 0;
  private expected: RequestFilter[] = [];
  private faults: (() => void)[] = [];
  private auditMark = 0;
  private stopped = false;

  /** A test's cluster on its file's control plane (startHiveApi), which must hold no test's objects. */
  static async start(hive: HiveApi): Promise<Cluster> {
    const c = new Cluster();
    c.api = hive.api;
    c.installed = hive.installed;
    // Requests and refusals of this test only.
    c.api.resetRequests();
    c.auditMark = c.api.cp.audit.mark();
    const kc = c.api.kubeConfig();
    c.admin = { core: kc.makeApiClient(CoreV1Api), custom: kc.makeApiClient(CustomObjectsApi) };
    c.base = mkdtempSync(join(tmpdir(), "hive-int-"));
    c.containers = new FakeContainers(c.base);
    return c;
  }

  /** A fault of the proxy (RealApi.inject) for this test only: stop() removes it. */
  inject(rule: FaultRule): void {
    this.faults.push(this.api.inject(rule));
  }

  /** The agent's ServiceAccount as its Pod (default hive-agent-<node>) on `node` authenticates: a real bound token. */
  async agentKubeConfig(node: string, pod?: string): Promise<KubeConfig> {
    return this.api.cp.kubeConfig(await this.installed.agentToken(node, pod), this.api.url);
  }

  /**
   * Declares requests a test makes with an agent's token on purpose to see them refused (a
   * forged write); any other refusal of an agent request fails stop().
   */
  expectRefusals(filter: RequestFilter): void {
    this.expected.push({ ...filter, user: this.installed.agentUser });
  }

  /** Agent requests the server refused (401, 403, 422) in this test, faults aside and undeclared. */
  refusals(): RequestRecord[] {
    return this.api.requests.filter(
      (r) =>
        r.user === this.installed.agentUser &&
        REFUSED.has(r.code) &&
        r.injected === undefined &&
        !this.expected.some((f) => matchesFilter(r, f)),
    );
  }

  /** A namespace (if missing), once pods can be created in it (its default ServiceAccount exists). */
  async createNamespace(name: string): Promise<void> {
    await this.admin.core.createNamespace({ body: { metadata: { name } } }).catch((err: unknown) => {
      if ((err as { code?: number }).code !== 409) throw err;
    });
    await waitForDefaultServiceAccount(this.admin.core, name);
  }

  async addNode(
    name: string,
    kernelId: string,
    options: {
      loader?: boolean;
      pods?: boolean;
      /** The agent's pod (default hive-agent-<node>): its Lease identity is `<node>/<pod>`. */
      pod?: string;
      lease?: typeof FAST_LEASE;
      /** The kernel Lease's timing (default: `lease`). */
      loaderLease?: typeof FAST_LEASE;
      kernelFails?: boolean;
      /** The kernel program loads only once this settles (a slow load, as under emulation). */
      kernelLoads?: Promise<unknown>;
      /**
       * NodeAgentOptions.sharedKernels: nodes of this cluster may share a kernel (kind). Default
       * true here, where simulated nodes share kernels; the product's default is false.
       */
      sharedKernels?: boolean;
      /** Also receives the agent's log lines (JSON), at the level the harness logs (default error). */
      logLines?: string[];
      /** The kernel cannot deny, for this reason (KernelWatcher.denyState). */
      denyUnavailable?: string;
      /** Accesses also go through this alert pipeline, as the agent's main.ts sends them. */
      alerts?: AlertPipeline;
      /**
       * The Ready condition of the agent's own Pod (the DaemonSet's), as its kubelet reports it:
       * what the pods role reads to tell covered nodes. Default: none reported (the Pod exists,
       * its token is bound to it, but it is Pending: the node counts as uncovered).
       */
      agentPod?: "ready" | "notReady";
      /** NodeAgentOptions.uncoveredGraceMs (default here 1 s). */
      uncoveredGraceMs?: number;
      /** hive_policy_pods_uncovered, as main.ts passes it. */
      podsUncoveredGauge?: NodeAgentOptions["podsUncoveredGauge"];
      /** PolicyReports by the pods role (NodeAgentOptions.reports); default none. */
      reports?: NodeAgentOptions["reports"];
    } = {},
  ): Promise<SimNode> {
    const kernels: RecordingKernel[] = [];
    const accesses: SimNode["accesses"] = [];
    const pod = options.pod ?? `hive-agent-${name}`;
    // The Node as its kubelet reports it: the kernel's Lease is genuinely held only by its nodes.
    await this.ensureNode(name, kernelId);
    // The token is bound to the agent's Pod on this Node: the server itself puts the node in it.
    const kubeConfig = await this.agentKubeConfig(name, pod);
    if (options.agentPod) await this.setAgentPodReady(pod, options.agentPod === "ready");
    const clients = createKubeClients({ kubeConfig });
    const agent = await startNodeAgent({
      clients,
      nodeName: name,
      identity: agentIdentity(name, pod),
      namespace: AGENT_NS,
      kernelId,
      sharedKernels: options.sharedKernels ?? true,
      // Each node its own /run/hive: nodes sharing a kernel (kind) meet on the kernel's Lease.
      loaderLock: join(this.base, "nodes", name, "run", "hive.loader.lock"),
      resolver: createFileResolver(this.containers, this.containers.proc),
      openKernel: async () => {
        if (options.kernelFails)
          throw new HiveError("KprobeUnsupported", "kprobes are not available", {
            object: "inode_permission",
          });
        await options.kernelLoads;
        const k = new RecordingKernel();
        k.denyUnavailable = options.denyUnavailable;
        kernels.push(k);
        return k;
      },
      onAccess: (event, matched) => {
        accesses.push({ event, matched: matched.map((m) => m.data), traps: matched.map((m) => m.trap) });
        for (const { data, trap } of matched)
          options.alerts?.handle(event, alertSourceFromHiveData(data, trap, { nodeName: name, kernelId }));
      },
      log: createLogger(
        { node: name },
        {
          level: (process.env.HIVE_LOG_LEVEL as "debug") ?? "error",
          sink: (line) => {
            options.logLines?.push(line);
            process.stderr.write(`${line}\n`);
          },
        },
      ),
      roles: { loader: options.loader ?? true, pods: options.pods ?? true },
      lease: options.lease ?? FAST_LEASE,
      loaderLease: options.loaderLease ?? options.lease ?? FAST_LEASE,
      orphanGraceMs: 300,
      retryBaseMs: 100,
      notReadyReportMs: 0,
      // Long enough for a node seeded before its agent's Pod is Ready (addNode) not to count.
      uncoveredGraceMs: options.uncoveredGraceMs ?? 1000,
      ...(options.podsUncoveredGauge ? { podsUncoveredGauge: options.podsUncoveredGauge } : {}),
      ...(options.reports ? { reports: options.reports } : {}),
    });
    const node: SimNode = {
      name,
      kernelId,
      agent,
      kernels,
      accesses,
      activeKernel: () => (agent.loader() ? kernels.at(-1) : undefined),
    };
    this.nodes.push(node);
    return node;
  }

  /** Sets the Ready condition of an agent's Pod, as its kubelet does when readiness changes. */
  async setAgentPodReady(pod: string, ready: boolean): Promise<void> {
    const fresh = await this.admin.core.readNamespacedPod({ name: pod, namespace: AGENT_NS });
    const condition = { type: "Ready", status: ready ? "True" : "False", lastTransitionTime: new Date() };
    fresh.status = { ...fresh.status, phase: "Running", conditions: [condition] };
    await this.admin.core.replaceNamespacedPodStatus({ name: pod, namespace: AGENT_NS, body: fresh });
  }

  /** Creates the Node (or sets its boot id) as the kubelet reports it. */
  async ensureNode(name: string, bootID: string): Promise<void> {
    await this.api.seedNode(name, bootID);
  }

  /** A pod on `node` whose containers run (status written through the status subresource, as the kubelet does). */
  async addPod(
    name: string,
    node: string,
    options: {
      labels?: Record<string, string>;
      namespace?: string;
      ip?: string;
      containers?: string[];
      files?: Record<string, string>;
      running?: boolean;
      /** The pod's controller, e.g. a Deployment's ReplicaSet (it must exist: the garbage collector removes orphans). */
      owner?: { apiVersion: string; kind: string; name: string; uid: string };
    } = {},
  ): Promise<V1Pod> {
    const namespace = options.namespace ?? "default";
    const containers = options.containers ?? ["app"];
    const created = await this.admin.core.createNamespacedPod({
      namespace,
      body: {
        metadata: {
          name,
          namespace,
          ...(options.labels ? { labels: options.labels } : {}),
          ...(options.owner ? { ownerReferences: [{ ...options.owner, controller: true }] } : {}),
        },
        spec: { nodeName: node, containers: containers.map((c) => ({ name: c, image: "busybox" })) },
      },
    });
    if (options.running === false) return created;
    return this.runPod(created, options.ip ?? `10.0.0.${++this.podSeq}`, options.files);
  }

  /** Starts new containers (directories) for every container of `pod` and reports them running. */
  async runPod(pod: V1Pod, ip: string, files?: Record<string, string>): Promise<V1Pod> {
    const containerIds = Object.fromEntries(
      (pod.spec?.containers ?? []).map((c) => [
        c.name,
        this.containers.add(
          `${pod.metadata?.name}-${c.name}-${pod.metadata?.uid?.slice(0, 8)}-${++this.containerSeq}`,
          files,
        ),
      ]),
    );
    return setPodRunning(this.admin.core, pod.metadata?.namespace ?? "default", pod.metadata?.name ?? "", {
      podIP: ip,
      containerIds,
    });
  }

  async setPodPhase(name: string, phase: "Failed" | "Succeeded", namespace = "default"): Promise<void> {
    const fresh = await this.admin.core.readNamespacedPod({ name, namespace });
    fresh.status = { ...fresh.status, phase };
    await this.admin.core.replaceNamespacedPodStatus({ name, namespace, body: fresh });
  }

  /**
   * Deletes a pod at once (gracePeriodSeconds 0): a pod bound to a node is otherwise only marked
   * Terminating, waiting for a kubelet that does not run here.
   */
  async deletePod(name: string, namespace = "default"): Promise<void> {
    await this.admin.core.deleteNamespacedPod({ name, namespace, gracePeriodSeconds: 0 });
  }

  /** A HivePolicy in the platform namespace, or in `namespace` (a tenant's). */
  async createPolicy(name: string, traps: HiveTrap[], namespace = POLICY_NS): Promise<HivePolicy> {
    return (await this.admin.custom.createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace,
      plural: PLURAL_POLICY,
      body: { apiVersion: API_VERSION, kind: KIND_POLICY, metadata: { name }, spec: { traps } },
    })) as HivePolicy;
  }

  async getPolicy(name: string, namespace = POLICY_NS): Promise<HivePolicy | undefined> {
    try {
      return (await this.admin.custom.getNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace,
        plural: PLURAL_POLICY,
        name,
      })) as HivePolicy;
    } catch {
      return undefined;
    }
  }

  /**
   * Replaces a policy's traps as `kubectl patch --type merge` does: a read and a replace would
   * meet a 409 whenever the agents wrote the policy's status or finalizer in between.
   */
  async editPolicy(name: string, traps: HiveTrap[]): Promise<void> {
    await this.admin.custom.patchNamespacedCustomObject(
      {
        group: GROUP,
        version: VERSION,
        namespace: POLICY_NS,
        plural: PLURAL_POLICY,
        name,
        body: { spec: { traps } },
      },
      mergePatch,
    );
  }

  async deletePolicy(name: string): Promise<void> {
    await this.admin.custom.deleteNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: POLICY_NS,
      plural: PLURAL_POLICY,
      name,
    });
  }

  /** HiveData as stored in the API server (not any agent's cache). */
  async data(): Promise<HiveData[]> {
    const list = (await this.admin.custom.listClusterCustomObject({
      group: GROUP,
      version: VERSION,
      plural: PLURAL_DATA,
    })) as { items: HiveData[] };
    return list.items;
  }

  /** Nodes whose loader is active for `kernelId` right now. */
  loadersOf(kernelId: string): SimNode[] {
    return this.nodes.filter((n) => n.kernelId === kernelId && n.agent.loader() !== undefined);
  }

  /**
   * Stops every agent, removes this test's faults and objects (the next test starts from the
   * installed cluster), and fails when the server refused an agent request the test did not declare.
   */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    await Promise.all(this.nodes.map((n) => n.agent.stop()));
    for (const remove of this.faults) remove();
    const refused = this.refusals();
    const reasons = this.api.cp.audit.refusals({ user: this.installed.agentUser }, this.auditMark);
    try {
      await resetCluster(this.api);
    } finally {
      rmSync(this.base, { recursive: true, force: true });
    }
    if (refused.length === 0) return;
    const lines = refused.map(
      (r) =>
        `${r.code} ${r.verb} ${r.resource} ${r.namespace ?? "(cluster)"}/${r.name ?? ""} as node ${r.node}`,
    );
    throw new Error(
      `the API server refused ${refused.length} agent request(s):\n${lines.join("\n")}\n` +
        `its audit log says:\n${AuditLog.describe(reasons)}`,
    );
  }
}

/**
 * `hive agent` from this checkout as a child process (run from the repository root): node
 * `names.node`, pod `names.pod` in the agent namespace, authenticating with a real token bound to
 * that Pod (through a kubeconfig file at the proxy), no loader role, info logs on a piped stderr.
 * `args` adds flags; `forceGc` collects garbage every 250 ms so memory figures show what is live.
 */
export async function spawnAgentProcess(
  hive: HiveApi,
  names: { node: string; pod: string },
  args: string[],
  options: { forceGc?: boolean; dir: string },
): Promise<ChildProcess> {
  const kubeconfig = hive.api.cp.writeKubeconfig(
    join(options.dir, `${names.pod}.kubeconfig`),
    await hive.installed.agentToken(names.node, names.pod),
    hive.api.url,
  );
  // A CommonJS -e with a dynamic import, not --input-type=module: worker threads inherit the
  // process's flags, and --input-type breaks their module loading.
  const script = `${options.forceGc ? "setInterval(() => globalThis.gc?.(), 250).unref(); " : ""}import('./runtime/agent/main.ts').then(async (m) => { process.exitCode = await m.runAgent(process.argv.slice(1)); });`;
  return spawn(
    process.execPath,
    [
      ...(options.forceGc ? ["--expose-gc"] : []),
      "-e",
      script,
      "--",
      "--node-name",
      names.node,
      "--pod-name",
      names.pod,
      "--namespace",
      AGENT_NS,
      "--kubeconfig",
      kubeconfig,
      "--metrics-port",
      "0",
      // No kernel program in these processes: nothing to prove traps with.
      "--no-loader",
      "--no-trap-proof",
      ...args,
    ],
    { stdio: ["ignore", "ignore", "pipe"], env: { ...process.env, HIVE_LOG_LEVEL: "info" } },
  );
}

/**
 * Polls until `probe` holds (tests only: the agent itself never polls). Unlike `waitFor`, a
 * probe that throws is retried, and the last failure is named on timeout. The default timeout
 * allows for a real API server on a machine busy with other work; it costs only a failing test.
 */
export async function eventually<T>(
  probe: () => Promise<T | undefined | false> | T | undefined | false,
  what: string,
  timeoutMs = 15_000,
): Promise<T> {
  let last: unknown;
  const tolerant = async () => {
    try {
      return await probe();
    } catch (error) {
      last = error;
      return undefined;
    }
  };
  try {
    return await waitFor(tolerant, { what, timeoutMs, intervalMs: 50 });
  } catch (timeout) {
    throw last ? new Error(`${(timeout as Error).message}: ${String(last)}`) : timeout;
  }
}
