/**
 * The containers of the local containerd, for traps whose `match` names containers in
 * standalone mode. Three calls on containerd's own API over its socket: the namespaces,
 * each namespace's containers (id + labels, where CRI keeps pod and container names) and
 * its tasks (the running PID, whose /proc/PID/root is the container's root). The path
 * inside each container is then resolved by runtime/discover's in-root walker.
 *
 * The gRPC subset of containerd's API is defined once in runtime/discover/containerd-api.ts.
 */
import { existsSync } from "node:fs";
import { HiveError } from "../errors.ts";
import type { LocalContainer } from "./watch-plan.ts";

export const CONTAINERD_SOCKET = "/run/containerd/containerd.sock";

export interface ContainerLister {
  list(): Promise<LocalContainer[]>;
  close(): void;
}

/**
 * A lister on the containerd socket, or undefined when there is no socket (no containerd
 * on this machine: standalone mode then watches host paths only). gRPC is loaded only then.
 */
export async function openContainerLister(
  options: { socket?: string; timeoutMs?: number } = {},
): Promise<ContainerLister | undefined> {
  const socket = options.socket ?? CONTAINERD_SOCKET;
  if (!existsSync(socket)) return undefined;
  const { callRuntime, connectRuntimeService } = await import("../discover/containerd-api.ts");
  const timeoutMs = options.timeoutMs ?? 3000;
  const clients = {
    namespaces: connectRuntimeService(socket, "namespaces"),
    containers: connectRuntimeService(socket, "containers"),
    tasks: connectRuntimeService(socket, "tasks"),
  };
  return {
    async list() {
      try {
        const out: LocalContainer[] = [];
        const ns = await callRuntime<{ namespaces: { name: string }[] }>(
          clients.namespaces,
          "List",
          {},
          { timeoutMs },
        );
        for (const { name: namespace } of ns.namespaces) {
          const [cs, ts] = await Promise.all([
            callRuntime<{ containers: { id: string; labels: Record<string, string> }[] }>(
              clients.containers,
              "List",
              {},
              { namespace, timeoutMs },
            ),
            callRuntime<{ tasks: { container_id: string; id: string; pid: number; status: string }[] }>(
              clients.tasks,
              "List",
              {},
              { namespace, timeoutMs },
            ),
          ]);
          // A task's `id` is its container's id (containerd leaves `container_id` empty in List).
          const running = new Map(
            ts.tasks
              .filter((t) => t.status === "RUNNING" && t.pid > 0)
              .map((t) => [t.container_id || t.id, t.pid]),
          );
          for (const c of cs.containers) {
            const pid = running.get(c.id);
            // A container without a running task has no root to resolve in; it is not watched.
            if (pid === undefined) continue;
            out.push({ id: c.id, name: c.id, pid, runtimeNamespace: namespace, labels: c.labels ?? {} });
          }
        }
        return out;
      } catch (cause) {
        throw new HiveError("RuntimeUnavailable", "listing the containers of containerd failed", {
          object: socket,
          hint: "check that containerd runs and that this user may use its socket (root)",
          cause,
        });
      }
    },
    close() {
      for (const client of Object.values(clients)) client.close();
    },
  };
}
