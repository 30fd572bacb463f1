/**
 * `hive agent` as runAgent runs it (flags, clients, runtime socket, elections, metrics server,
 * shutdown) against a real kube-apiserver (test/cluster: etcd, the controller manager, the fault
 * proxy in front, Hive's rendered manifests applied by kubectl), with real containers from a
 * private containerd and a callback receiver on 127.0.0.1. The agent authenticates with a
 * TokenRequest token bound to its Pod on its Node, as a DaemonSet pod does. The kernel boundary is the one replaced part: each time the
 * node becomes its kernel's loader it gets a RecordingKernel (this machine's kernel cannot attach
 * kprobes; the libbpf loader is exercised in the QEMU kernel suite).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CoreV1Api, CustomObjectsApi } from "@kubernetes/client-node";
import { runAgent } from "../../runtime/agent/main.ts";
import { createLogger } from "../../runtime/log.ts";
import { watchTableFileFor } from "../../runtime/standalone/watch-table-file.ts";
import { retryOnConflict } from "../cluster/conflict.ts";
import { WITHOUT_KUBELET_CONTROLLERS } from "../cluster/controllers.ts";
import { installHive } from "../cluster/install.ts";
import { type RealApi, startRealApi } from "../cluster/real-api.ts";
import { RecordingKernel } from "../integration/harness.ts";
import { type Containerd, startContainerd } from "./containerd-harness.ts";

/** The agent's namespace (its Leases, the callback Secret, the platform's policies). */
export const AGENT_NAMESPACE = "hive-system";
/** The bearer token the callback Secret holds: the receiver records each request's Authorization. */
export const CALLBACK_TOKEN = "Bearer e2e-token";

export interface AgentWithContainers {
  cd: Containerd;
  api: RealApi;
  core: CoreV1Api;
  custom: CustomObjectsApi;
  /** One per time the node became its kernel's loader, the current one last. */
  kernels: RecordingKernel[];
  /** The callback's requests, each body with its `authorization` header. */
  received: Record<string, unknown>[];
  /** Base URL of the agent's /metrics, /readyz and /healthz. */
  metricsUrl: string;
  /** Where `hive status` finds the loader's watch table. */
  tableFile: string;
  /** Asks the agent to shut down (as SIGTERM does); `exited` settles with its exit code. */
  stop(): void;
  exited: Promise<number>;
  /**
   * Stops the agent (if still running), the control plane, containerd and the receiver; removes
   * the state. Fails when the server refused an agent request (its audit log: assertNoRefusals).
   */
  close(): Promise<void>;
}

export interface AgentWithContainersOptions {
  nodeName: string;
  kernelId: string;
  /** Flags added to the agent's command line. */
  args?: string[];
}

export async function startAgentWithContainers(
  options: AgentWithContainersOptions,
): Promise<AgentWithContainers> {
  const received: Record<string, unknown>[] = [];
  const receiver: Server = createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => {
      body += c.toString();
    });
    req.on("end", () => {
      received.push({
        ...(JSON.parse(body) as Record<string, unknown>),
        authorization: req.headers.authorization,
      });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
  const callback = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/alerts`;
  const stateDir = mkdtempSync(join(tmpdir(), "hive-agent-e2e-"));
  const pinRoot = join(stateDir, "bpf", "hive");
  const cd = await startContainerd();
  // The agent's Pod is the test's, not the DaemonSet controller's (see WITHOUT_KUBELET_CONTROLLERS).
  const api = await startRealApi({ controllers: WITHOUT_KUBELET_CONTROLLERS }).catch(
    async (error: unknown) => {
      await cd.stop();
      throw error;
    },
  );
  // A setup that fails leaves no control plane, containerd or receiver behind.
  const teardown = async () => {
    await api.stop();
    await cd.stop();
    receiver.close();
    rmSync(stateDir, { recursive: true, force: true });
  };
  try {
    return await withAgent();
  } catch (error) {
    await teardown();
    throw error;
  }

  async function withAgent(): Promise<AgentWithContainers> {
    const kc = api.kubeConfig();
    const core = kc.makeApiClient(CoreV1Api);
    const custom = kc.makeApiClient(CustomObjectsApi);
    // The agent runs with exactly the RBAC and admission policies the component renders.
    const installed = installHive(api.cp, {
      image: "hive:test",
      namespace: AGENT_NAMESPACE,
      callback: { url: callback, headersSecret: "callback-headers" },
    });
    // The Node as its kubelet reports it: it owns the agent's HiveData.
    await retryOnConflict(() => api.seedNode(options.nodeName, options.kernelId));
    const podName = `hive-agent-${options.nodeName}`;
    // Through the fault proxy, with the cluster CA: the kubeconfig a DaemonSet pod's would equal.
    const kubeconfig = api.cp.writeKubeconfig(
      join(stateDir, "agent.kubeconfig"),
      await installed.agentToken(options.nodeName, podName),
      api.url,
    );
    await core.createNamespacedSecret({
      namespace: AGENT_NAMESPACE,
      body: { metadata: { name: "callback-headers" }, stringData: { Authorization: CALLBACK_TOKEN } },
    });
    let stop: () => void = () => undefined;
    const until = new Promise((resolve) => {
      stop = () => resolve("test done");
    });
    const kernels: RecordingKernel[] = [];
    let metricsUrl = "";
    let started: () => void = () => undefined;
    const startedP = new Promise<void>((r) => {
      started = r;
    });
    const argv = [
      "--node-name",
      options.nodeName,
      "--pod-name",
      podName,
      "--namespace",
      AGENT_NAMESPACE,
      "--kubeconfig",
      kubeconfig,
      "--callback",
      callback,
      "--callback-headers-secret",
      "callback-headers",
      "--runtime-socket",
      cd.socket,
      "--containerd-namespace",
      `k8s.io,${cd.namespace}`,
      "--metrics-port",
      "0",
      "--lease-duration",
      "1500",
      "--spool-dir",
      join(stateDir, "spool"),
      "--pin-root",
      pinRoot,
      "--table-dir",
      join(stateDir, "run"),
      ...(options.args ?? []),
    ];
    const exited = runAgent(argv, {
      kernelId: options.kernelId,
      until,
      log: createLogger({}, { level: (process.env.HIVE_LOG_LEVEL as "debug") ?? "error" }),
      openKernel: async () => {
        const k = new RecordingKernel();
        kernels.push(k);
        return k;
      },
      onStarted: (info) => {
        metricsUrl = info.metricsUrl;
        started();
      },
    });
    // An agent that exits before it has started (a flag it refuses) must not leave the caller waiting.
    await Promise.race([
      startedP,
      exited.then((code) => {
        throw new Error(`the agent exited with ${code} before it started`);
      }),
    ]);
    return {
      cd,
      api,
      core,
      custom,
      kernels,
      received,
      metricsUrl,
      tableFile: watchTableFileFor(pinRoot, join(stateDir, "run")),
      stop,
      exited,
      async close() {
        stop();
        await exited;
        await teardown();
        installed.assertNoRefusals();
      },
    };
  }
}
