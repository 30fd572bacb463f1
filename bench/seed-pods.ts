/**
 * Set-up for the benchmarks on a real kube-apiserver (not measured): Nodes and running Pods
 * written through the API as the admin, directly (not through the fault proxy, whose request
 * records are the benchmarks' measurements), many requests in flight at once. A Pod is created,
 * then its status written through the status subresource, as its kubelet would report it; its
 * Node must exist first, or kube-controller-manager's pod garbage collector deletes it.
 * This file has no run(): bench/main.ts skips it.
 */
import type { CoreV1Api, V1Pod } from "@kubernetes/client-node";
import { PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";

const mergePatch = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

/** Runs `task` for every item, `concurrency` at a time. */
export async function inParallel<T>(
  items: readonly T[],
  task: (item: T, index: number) => Promise<unknown>,
  concurrency = 16,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      await task(items[i] as T, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
}

/** Retries a request answered 409 (a controller wrote the object meanwhile) or 429 (a cache warming up). */
async function retried<R>(request: () => Promise<R>): Promise<R> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await request();
    } catch (err) {
      const code = (err as { code?: number }).code;
      if ((code !== 409 && code !== 429) || attempt >= 20) throw err;
      await new Promise((r) => setTimeout(r, 50 * attempt));
    }
  }
}

/** Nodes as their kubelets register them, each reporting its kernel's boot id (bootIDOf). */
export async function createNodes(
  core: CoreV1Api,
  names: readonly string[],
  bootIDOf: (name: string, index: number) => string,
): Promise<void> {
  await inParallel(names, async (name, i) => {
    await retried(() =>
      core
        .createNode({ body: { metadata: { name, labels: { "kubernetes.io/hostname": name } } } })
        .catch((err: unknown) => {
          if ((err as { code?: number }).code !== 409) throw err;
        }),
    );
    await retried(() =>
      core.patchNodeStatus(
        { name, body: { status: { nodeInfo: { bootID: bootIDOf(name, i) } } } },
        mergePatch,
      ),
    );
  });
}

/**
 * Creates each pod of `pods` and reports it running: `status(created)` is the status its kubelet
 * writes (the created pod carries its uid, from which container ids may be made).
 */
export async function createRunningPods(
  core: CoreV1Api,
  pods: readonly V1Pod[],
  status: (created: V1Pod, index: number) => V1Pod["status"],
  concurrency = 16,
): Promise<void> {
  await inParallel(
    pods,
    async (pod, i) => {
      const namespace = pod.metadata?.namespace ?? "default";
      const created = await retried(() => core.createNamespacedPod({ namespace, body: pod }));
      await retried(() =>
        core.patchNamespacedPodStatus(
          { namespace, name: created.metadata?.name ?? "", body: { status: status(created, i) } },
          mergePatch,
        ),
      );
    },
    concurrency,
  );
}
