/**
 * Which nodes run a kernel. Admission binds what an agent writes to its own node; this binds a
 * node to its kernel, so that a compromised node can neither hold another kernel's election nor
 * arm files in another kernel's watch map.
 *
 * A kernel is its own node's alone unless the cluster declares that nodes share kernels
 * (`sharedKernels`: nodes that are containers on one host, as kind's). Only then is another
 * node's word taken: its kubelet's report of the kernel it runs (Node.status.nodeInfo.bootID,
 * the kernel id Hive uses), which that node writes for itself, so a compromised node of such a
 * cluster can claim any kernel's boot id (docs/security-model.md). Nodes are read by name when
 * needed (never listed: the agent's memory must not grow with the cluster) and genuine answers
 * are remembered.
 */
import type { HiveData } from "../../api/data.ts";
import { LABEL_NODE } from "../../api/meta.ts";
import type { NodeOwner } from "../controllers/hive-data.ts";
import type { WatchEventType } from "../controllers/ports.ts";
import { isNotFound } from "../k8s/api-errors.ts";
import type { KubeClients } from "../k8s/kube-client.ts";
import type { Logger } from "../log.ts";

/** True when `node` runs this kernel; false when it does not (or may not); throws when unknown. */
export type NodeKernelCheck = (node: string) => Promise<boolean>;

export interface NodeKernelCheckOptions {
  /** Nodes of this cluster may share a kernel (kind): another node's reported boot id is believed. */
  shared: boolean;
  log: Pick<Logger, "error">;
  rememberMs?: number;
}

export function createNodeKernelCheck(
  clients: Pick<KubeClients, "core">,
  kernelId: string,
  options: NodeKernelCheckOptions,
): NodeKernelCheck {
  const { log } = options;
  const genuine = new Map<string, number>();
  const said = new Set<string>();
  const bootIdOf = async (node: string): Promise<string | undefined> => {
    try {
      return (await clients.core.readNode({ name: node })).status?.nodeInfo?.bootID;
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw error;
    }
  };
  if (!options.shared) {
    // Another node is never this kernel's: one acting for it (its Lease, its HiveData) is a
    // conflict, said once per node with the boot id its Node reports: a compromised node, or a
    // cluster whose nodes share a host without saying so.
    return async (node) => {
      if (said.has(node)) return false;
      said.add(node);
      const fields: Record<string, unknown> = { node, kernelId };
      try {
        fields.reportedBootId = await bootIdOf(node);
      } catch (error) {
        fields.nodeUnread = error;
      }
      log.error("another node acts for this node's kernel; refused, since nodes do not share kernels here", {
        ...fields,
        hint: "a compromised node (its Node may report any boot id), or nodes that share one host's kernel (kind, k3d): then set sharedKernels",
      });
      return false;
    };
  }
  const rememberMs = options.rememberMs ?? 300_000;
  return async (node) => {
    if ((genuine.get(node) ?? 0) > performance.now()) return true;
    if ((await bootIdOf(node)) !== kernelId) return false;
    genuine.set(node, performance.now() + rememberMs);
    return true;
  };
}

/**
 * This agent's own Node as the owner of its HiveData, read once (a node's uid never changes).
 * A Node that does not exist is an error: NODE_NAME must name the node the agent runs on.
 */
export function createNodeOwner(
  clients: Pick<KubeClients, "core">,
  nodeName: string,
): () => Promise<NodeOwner> {
  let owner: NodeOwner | undefined;
  return async () => {
    if (owner) return owner;
    const node = await clients.core.readNode({ name: nodeName });
    const uid = node.metadata?.uid;
    if (!uid) throw new Error(`Node ${nodeName} has no uid`);
    owner = { apiVersion: "v1", kind: "Node", name: nodeName, uid };
    return owner;
  };
}

const RETRY_MS = [500, 1000, 2000, 4000, 8000];

/**
 * Passes this kernel's HiveData to `sink`, those of other nodes (a kernel shared by several
 * nodes, as kind's) only once their node is known to run this kernel. A HiveData from a node
 * that does not is dropped with a warning (a forgery: its node label is its writer's, admission
 * sees to that), and removed from the sink if it had passed before. Other nodes' events keep
 * their order: they pass through one queue.
 */
export function guardKernelData(
  ownNode: string,
  reportsKernel: NodeKernelCheck,
  sink: (type: WatchEventType, data: HiveData) => void,
  log: Logger,
): (type: WatchEventType, data: HiveData) => void {
  let queue: Promise<void> = Promise.resolve();
  const passed = new Set<string>();
  const key = (d: HiveData) => `${d.metadata.namespace ?? ""}/${d.metadata.name ?? ""}`;
  const verdict = async (node: string): Promise<boolean> => {
    for (let attempt = 0; ; attempt++) {
      try {
        return await reportsKernel(node);
      } catch (error) {
        const wait = RETRY_MS[attempt];
        if (wait === undefined) {
          log.warn("cannot tell whether a node runs this kernel; its HiveData is not armed", { node, error });
          return false;
        }
        await new Promise((resolve) => setTimeout(resolve, wait));
      }
    }
  };
  return (type, data) => {
    const node = data.metadata.labels?.[LABEL_NODE] ?? "";
    if (node === ownNode) return sink(type, data);
    queue = queue.then(async () => {
      if (type === "DELETED") {
        passed.delete(key(data));
        return sink(type, data);
      }
      if (await verdict(node)) {
        passed.add(key(data));
        return sink(type, data);
      }
      log.warn("HiveData from a node that does not run this kernel ignored", {
        hiveData: key(data),
        node,
      });
      if (passed.delete(key(data))) sink("DELETED", data);
    });
  };
}
