/**
 * What a controller test talks to: a real control plane (control-plane.ts) behind the fault proxy
 * (fault-proxy.ts), one per test file, so that tests running side by side never share a cluster.
 *
 *   const api = await startRealApi();
 *   const kc = api.kubeConfig();                 // the admin, through the proxy
 *   const kcA = api.kubeConfig("tenant-a");      // a user the server authorizes by its own RBAC
 *   api.inject({ verb: "update", resource: "leases", status: 500, times: 1 });
 *   await api.restart({ downtimeMs: 500 });      // an outage: connections and watches cut
 *   api.cp.audit.refusals({ user: "tenant-a" }); // what the server refused, from its audit log
 *   await api.stop();
 */
import { CoreV1Api } from "@kubernetes/client-node";
import { type ControlPlane, type ControlPlaneOptions, startControlPlane } from "./control-plane.ts";
import { type FaultProxy, startFaultProxy } from "./fault-proxy.ts";
import { seedNode } from "./testing.ts";

export interface RealApi extends FaultProxy {
  readonly cp: ControlPlane;
  /** Compacts etcd at its current revision (continue tokens and, without the watch cache, watches from older revisions get 410). */
  compact(): Promise<number>;
  /** Sets a Node's boot id as its kubelet reports it (status subresource), creating the Node first. */
  seedNode(name: string, bootID: string): Promise<void>;
}

export async function startRealApi(options: ControlPlaneOptions = {}): Promise<RealApi> {
  const cp = await startControlPlane(options);
  let proxy: FaultProxy;
  try {
    // The names a guest reaches the server by are those it reaches the proxy by.
    proxy = await startFaultProxy(cp, options.extraSans ? { extraSans: options.extraSans } : {});
  } catch (err) {
    await cp.stop();
    throw err;
  }
  const core = cp.adminKubeConfig().makeApiClient(CoreV1Api);
  return Object.assign(Object.create(null), proxy, {
    cp,
    compact: () => cp.compactEtcd(),
    seedNode: (name: string, bootID: string) => seedNode(core, name, bootID),
    async stop() {
      await proxy.stop();
      await cp.stop();
    },
  }) as RealApi;
}
