/** Small helpers for tests that drive a real API server through @kubernetes/client-node. */
import type { CoreV1Api } from "@kubernetes/client-node";

/**
 * Polls `probe` until it returns a value other than undefined/false, or fails after `timeoutMs`.
 * A probe the API server answered with 429 (its storage (re)initializing, or priority and fairness
 * shedding load: it asks the client to retry) is polled again, as client-go retries it; any other
 * error fails at once.
 */
export async function waitFor<T>(
  probe: () => T | undefined | false | Promise<T | undefined | false>,
  options: { timeoutMs?: number; intervalMs?: number; what?: string } = {},
): Promise<T> {
  const deadline = Date.now() + (options.timeoutMs ?? 5000);
  for (;;) {
    let v: T | undefined | false;
    try {
      v = await probe();
    } catch (error) {
      if (!askedToRetry(error) || Date.now() > deadline) throw error;
      // The server's Retry-After for these is a second: not sooner than that.
      await new Promise((r) => setTimeout(r, Math.min(RETRY_AFTER_MS, Math.max(0, deadline - Date.now()))));
      continue;
    }
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${options.what ?? "condition"}`);
    await new Promise((r) => setTimeout(r, options.intervalMs ?? 10));
  }
}

const RETRY_AFTER_MS = 1000;

/** An API request the server asked to be retried later (HTTP 429 Too Many Requests). */
function askedToRetry(error: unknown): boolean {
  return typeof error === "object" && error !== null && (error as { code?: unknown }).code === 429;
}

/** The Kubernetes Status body carried by a client-node ApiException (its body is JSON text). */
export function statusOf(err: unknown): {
  kind?: string;
  reason?: string;
  code?: number;
  message?: string;
  details?: Record<string, unknown>;
} {
  const body = (err as { body?: unknown }).body;
  if (typeof body === "string") return JSON.parse(body);
  if (body && typeof body === "object") return body as ReturnType<typeof statusOf>;
  throw new Error(`not an API error: ${String(err)}`);
}

/** Awaits a promise that must reject, returning the rejection. */
export async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error("expected the request to fail, it succeeded");
}

/** A pod body with one container, optionally on a node and with labels. */
export function podBody(
  name: string,
  options: { node?: string; labels?: Record<string, string>; namespace?: string } = {},
) {
  return {
    metadata: {
      name,
      ...(options.namespace ? { namespace: options.namespace } : {}),
      ...(options.labels ? { labels: options.labels } : {}),
    },
    spec: {
      containers: [{ name: "app", image: "busybox" }],
      ...(options.node ? { nodeName: options.node } : {}),
    },
  };
}

/**
 * Sets a pod's status the way a kubelet reports it (through the status subresource): phase,
 * pod IP and one ready, running containerStatus per container with the given container ids.
 */
export async function setPodRunning(
  core: CoreV1Api,
  namespace: string,
  name: string,
  options: { podIP?: string; containerIds?: Record<string, string>; phase?: string } = {},
) {
  const pod = await core.readNamespacedPod({ namespace, name });
  const containers = pod.spec?.containers ?? [];
  return core.replaceNamespacedPodStatus({
    namespace,
    name,
    body: {
      ...pod,
      status: {
        ...pod.status,
        phase: options.phase ?? "Running",
        ...(options.podIP ? { podIP: options.podIP, podIPs: [{ ip: options.podIP }] } : {}),
        containerStatuses: containers.map((c) => ({
          name: c.name,
          image: c.image ?? "",
          imageID: "",
          ready: true,
          restartCount: 0,
          started: true,
          state: { running: { startedAt: new Date() } },
          ...(options.containerIds?.[c.name] ? { containerID: options.containerIds[c.name] } : {}),
        })),
      },
    },
  });
}

/**

/**
 * Creates the Node `name` (or sets its boot id) as its kubelet reports it: status written
 * through the status subresource (create drops it). The agent reads its own Node, which owns
 * its HiveData, and other nodes' boot ids.
 */
export async function seedNode(core: CoreV1Api, name: string, bootID: string): Promise<void> {
  // The controller manager may update a new Node between its creation and this write (409): read again.
  for (let attempt = 0; ; attempt++) {
    let node = await core.readNode({ name }).catch(() => undefined);
    node ??= await core.createNode({
      body: { metadata: { name, labels: { "kubernetes.io/hostname": name } } },
    });
    const nodeInfo = { ...(node.status?.nodeInfo ?? {}), bootID } as NonNullable<
      NonNullable<typeof node.status>["nodeInfo"]
    >;
    node.status = { ...node.status, nodeInfo };
    try {
      await core.replaceNodeStatus({ name, body: node });
      return;
    } catch (err) {
      if ((err as { code?: number }).code !== 409 || attempt >= 10) throw err;
    }
  }
}
