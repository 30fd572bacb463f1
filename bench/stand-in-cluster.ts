/**
 * The benchmarks' cluster: simulated nodes running the real agent composition against the API
 * server stand-in (test/apiserver/), whose in-memory store and list-source classification the
 * benchmarks read. The tests' harness (test/integration/harness.ts) runs a real kube-apiserver;
 * the fake kernel and containers are shared with it.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CoreV1Api, CustomObjectsApi, type V1Pod } from "@kubernetes/client-node";
import { hiveCrds } from "../api/crd.ts";
import type { HiveData } from "../api/data.ts";
import {
  AGENT_SELECTOR,
  API_VERSION,
  GROUP,
  KIND_POLICY,
  PLURAL_DATA,
  PLURAL_POLICY,
  VERSION,
} from "../api/meta.ts";
import type { HivePolicy, HiveTrap } from "../api/policy.ts";
import { agentIdentity } from "../runtime/agent/loader-election.ts";
import { type NodeAgentOptions, startNodeAgent } from "../runtime/agent/node-agent.ts";
import { alertSourceFromHiveData } from "../runtime/alerts/alert-source.ts";
import type { AlertPipeline } from "../runtime/alerts/pipeline.ts";
import { createFileResolver } from "../runtime/discover/file-resolver.ts";
import { HiveError } from "../runtime/errors.ts";
import { createKubeClients } from "../runtime/k8s/kube-client.ts";
import { createLogger } from "../runtime/log.ts";
import { serviceAccountUser } from "../test/apiserver/authn.ts";
import { type Installed, installHive } from "../test/apiserver/install.ts";
import { type ApiServer, type StartOptions, startApiServer } from "../test/apiserver/server.ts";
import { seedNode, setPodRunning } from "../test/apiserver/testing.ts";
import {
  AGENT_NS,
  FakeContainers,
  POLICY_NS,
  RecordingKernel,
  type SimNode,
} from "../test/integration/harness.ts";

export { AGENT_NS };

const FAST_LEASE = { leaseDurationMs: 1200, renewDeadlineMs: 800, retryPeriodMs: 200 };

export class Cluster {
  api!: ApiServer;
  admin!: { core: CoreV1Api; custom: CustomObjectsApi };
  containers!: FakeContainers;
  nodes: SimNode[] = [];
  installed!: Installed;
  private base = "";
  private podSeq = 0;
  private containerSeq = 0;

  static async start(options: Pick<StartOptions, "admission"> = {}): Promise<Cluster> {
    const c = new Cluster();
    c.api = await startApiServer({ crds: hiveCrds(), ...options });
    const kc = c.api.kubeConfig();
    c.admin = { core: kc.makeApiClient(CoreV1Api), custom: kc.makeApiClient(CustomObjectsApi) };
    // The RBAC and admission policies the stand-in enforces are the component's own.
    c.installed = installHive(c.api, { image: "hive:test", namespace: AGENT_NS });
    c.base = mkdtempSync(join(tmpdir(), "hive-int-"));
    c.containers = new FakeContainers(c.base);
    return c;
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
      /** Accesses also go through this alert pipeline, as the agent's main.ts sends them. */
      alerts?: AlertPipeline;
      /**
       * The agent's own Pod (the DaemonSet's) as its kubelet reports it, Ready or not: what the
       * pods role reads to tell covered nodes. Default: none (the node counts as uncovered).
       */
      agentPod?: "ready" | "notReady";
      /** NodeAgentOptions.uncoveredGraceMs (default here 1 s). */
      uncoveredGraceMs?: number;
      /** hive_policy_pods_uncovered, as main.ts passes it. */
      podsUncoveredGauge?: NodeAgentOptions["podsUncoveredGauge"];
    } = {},
  ): Promise<SimNode> {
    const kernels: RecordingKernel[] = [];
    const accesses: SimNode["accesses"] = [];
    const pod = options.pod ?? `hive-agent-${name}`;
    // The Node as its kubelet reports it: the kernel's Lease is genuinely held only by its nodes.
    await this.ensureNode(name, kernelId);
    if (options.agentPod) await this.addAgentPod(name, pod, options.agentPod === "ready");
    const clients = createKubeClients({ kubeConfig: this.api.kubeConfig(this.installed.agent(name, pod)) });
    const agent = await startNodeAgent({
      clients,
      nodeName: name,
      identity: agentIdentity(name, pod),
      namespace: AGENT_NS,
      kernelId,
      // Each node its own /run/hive: nodes sharing a kernel (kind) meet on the kernel's Lease.
      loaderLock: join(this.base, "nodes", name, "run", "hive.loader.lock"),
      resolver: createFileResolver(this.containers, this.containers.proc),
      openKernel: async () => {
        if (options.kernelFails)
          throw new HiveError("KprobeUnsupported", "kprobes are not available", {
            object: "inode_permission",
          });
        const k = new RecordingKernel();
        kernels.push(k);
        return k;
      },
      onAccess: (event, matched) => {
        accesses.push({ event, matched: matched.map((m) => m.data), traps: matched.map((m) => m.trap) });
        for (const { data, trap } of matched)
          options.alerts?.handle(event, alertSourceFromHiveData(data, trap, { nodeName: name, kernelId }));
      },
      log: createLogger({ node: name }, { level: (process.env.HIVE_LOG_LEVEL as "debug") ?? "error" }),
      roles: { loader: options.loader ?? true, pods: options.pods ?? true },
      lease: options.lease ?? FAST_LEASE,
      loaderLease: options.loaderLease ?? options.lease ?? FAST_LEASE,
      orphanGraceMs: 300,
      retryBaseMs: 100,
      notReadyReportMs: 0,
      // Long enough for a node seeded before its agent's Pod is Ready (addNode) not to count.
      uncoveredGraceMs: options.uncoveredGraceMs ?? 1000,
      ...(options.podsUncoveredGauge ? { podsUncoveredGauge: options.podsUncoveredGauge } : {}),
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

  /**
   * The agent's Pod on `node`, labelled as the DaemonSet's, with the Ready condition its kubelet
   * reports (the simulated agent itself runs in this process). Its container never runs here:
   * policies of these tests select it only if they match every pod of the agent's namespace.
   */
  async addAgentPod(node: string, pod: string, ready: boolean): Promise<void> {
    await this.admin.core.createNamespacedPod({
      namespace: AGENT_NS,
      body: {
        metadata: { name: pod, namespace: AGENT_NS, labels: { ...AGENT_SELECTOR } },
        spec: { nodeName: node, containers: [{ name: "agent", image: "hive:test" }] },
      },
    });
    await this.setAgentPodReady(pod, ready);
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
    seedNode(this.api, name, bootID);
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

  async editPolicy(name: string, traps: HiveTrap[]): Promise<void> {
    const current = (await this.getPolicy(name)) as HivePolicy;
    await this.admin.custom.replaceNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: POLICY_NS,
      plural: PLURAL_POLICY,
      name,
      body: { ...current, spec: { traps } },
    });
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

  /** Stops everything; fails the test when the server refused an agent request it did not expect. */
  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((n) => n.agent.stop()));
    await this.api.stop();
    rmSync(this.base, { recursive: true, force: true });
    this.installed.assertNoRefusals();
  }
}

/**
 * `hive agent` from this checkout as a child process (run from the repository root): node
 * `node` (also its token on the stand-in at `server`), pod `pod` in the agent namespace, no
 * loader role, info logs on a piped stderr. `args` adds flags; `forceGc` collects garbage
 * every 250 ms so memory figures show what is live.
 */
export function spawnAgentProcess(
  api: ApiServer,
  names: { node: string; pod: string },
  args: string[],
  options: { forceGc?: boolean } = {},
): ChildProcess {
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
      "--server",
      api.url,
      "--token",
      // The agent's ServiceAccount as its pod on this node authenticates (installHive granted it).
      api.token(serviceAccountUser(AGENT_NS, "hive-agent", names.node, names.pod)),
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
