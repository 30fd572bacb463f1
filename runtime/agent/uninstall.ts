/**
 * Whether a stopping agent is being uninstalled, or only restarted. A restart (a rolling update,
 * a drained node, a crash) leaves the kernel program pinned and attached so that nothing is missed
 * while no agent runs; an uninstall (`pulumi destroy`, `kubectl delete`) must take it away, or a
 * node keeps a program of a monitor that no longer exists. The agent's own DaemonSet decides:
 * gone, or being deleted, is an uninstall. Anything the agent cannot read (the API server away,
 * RBAC gone first) keeps the program: a missed uninstall leaves state that
 * `rm -r /sys/fs/bpf/hive` removes, a wrong one leaves a node blind.
 */
import { apiFailure, isNotFound } from "../k8s/api-errors.ts";
import type { AppsApi } from "../k8s/kube-apis.ts";

export interface StopKind {
  uninstall: boolean;
  why: string;
}

/** Reads DaemonSet `namespace/name` (the agent's RBAC allows `get` on that name only). */
export async function stopKind(
  apps: AppsApi,
  namespace: string,
  name: string | undefined,
  timeoutMs = 5000,
): Promise<StopKind> {
  if (name === undefined) return { uninstall: false, why: "no --daemonset: not run by a DaemonSet" };
  try {
    const ds = await Promise.race([
      apps.readNamespacedDaemonSet({ name, namespace }),
      new Promise<never>((_, reject) =>
        setTimeout(() => reject(new Error(`no answer in ${timeoutMs} ms`)), timeoutMs).unref(),
      ),
    ]);
    if (ds.metadata?.deletionTimestamp)
      return { uninstall: true, why: `DaemonSet ${namespace}/${name} is being deleted` };
    return { uninstall: false, why: `DaemonSet ${namespace}/${name} still exists: a restart` };
  } catch (error) {
    if (isNotFound(error)) return { uninstall: true, why: `DaemonSet ${namespace}/${name} is gone` };
    const failure = apiFailure(error);
    return {
      uninstall: false,
      why: `cannot read DaemonSet ${namespace}/${name} (${failure.code ?? ""} ${failure.message}): keeping the program, as for a restart`,
    };
  }
}
