/**
 * What every step of `hive agent` shares once its configuration is read: the logger at the
 * configured level naming this node and pod, this kernel's id, the Kubernetes clients and the
 * metrics registry.
 */
import { buildInfo } from "../build-info.ts";
import { createKubeClients, type KubeClients, type KubeConfigSource } from "../k8s/kube-client.ts";
import { DEFAULT_PIN_ROOT } from "../kernel/bpffs.ts";
import { createLogger, type Logger } from "../log.ts";
import { createHiveMetrics, type HiveMetrics } from "../metrics/index.ts";
import { type AgentConfig, readBootId } from "./config.ts";

export interface AgentBase {
  config: AgentConfig;
  log: Logger;
  kernelId: string;
  clients: KubeClients;
  metrics: HiveMetrics;
  /** bpffs directory of this kernel's pinned maps (--pin-root, else the kernel loader's default). */
  pinRoot: string;
}

/** How to reach the API server: a URL (and token), else a kubeconfig file, else in-cluster. */
export function kubeConfigSource(
  config: Pick<AgentConfig, "server" | "token" | "kubeconfig">,
): KubeConfigSource {
  if (config.server) return { url: config.server, ...(config.token ? { token: config.token } : {}) };
  return config.kubeconfig ? { kubeconfigPath: config.kubeconfig } : {};
}

export function createAgentBase(config: AgentConfig, given: { log?: Logger; kernelId?: string }): AgentBase {
  const log = (given.log ?? createLogger({ component: "hive-agent" }, { level: config.logLevel })).child({
    node: config.nodeName,
    pod: config.podName,
  });
  return {
    config,
    log,
    kernelId: given.kernelId ?? readBootId(config.bootIdPath),
    clients: createKubeClients(kubeConfigSource(config)),
    metrics: createHiveMetrics({ build: buildInfo(config.bpfObject) }),
    pinRoot: config.pinRoot ?? DEFAULT_PIN_ROOT,
  };
}
