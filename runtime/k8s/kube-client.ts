/**
 * Connection to the Kubernetes API and the typed clients Hive uses: the pod's service account
 * when in a cluster, a kubeconfig file, or a URL and token (with the CA that signed the server's
 * certificate when an https server's is not in the system's trust store). Requests share
 * keep-alive connections (kube-http.ts).
 */
import {
  type AppsApi,
  appsApi,
  type CoordinationApi,
  type CoreApi,
  type CustomApi,
  coordinationApi,
  coreApi,
  customApi,
} from "./kube-apis.ts";
import { type KubeConfigSource, loadConnection } from "./kube-connection.ts";
import { KubeHttp } from "./kube-http.ts";
import { KubeWatch, type WatchApi } from "./kube-watch.ts";

export type { KubeConfigSource } from "./kube-connection.ts";

export interface KubeClients {
  http: KubeHttp;
  core: CoreApi;
  custom: CustomApi;
  coordination: CoordinationApi;
  apps: AppsApi;
  watch: WatchApi;
}

/**
 * How long a watch may deliver nothing before the client gives up on its connection (a dead peer
 * sends no FIN). kube-apiserver's watch cache writes nothing on a quiet watch between BOOKMARKs,
 * which come about a minute apart (the first after up to two): client-node's default of 30 s cut
 * every quiet watch twice a minute. A healthy watch ends at its own timeoutSeconds instead.
 */
export const WATCH_INACTIVITY_TIMEOUT_MS = 180_000;

/** Typed clients over one connection (a ConfigInvalid HiveError when it cannot be read). */
export function createKubeClients(source: KubeConfigSource = {}): KubeClients {
  const http = new KubeHttp(loadConnection(source));
  const watch = new KubeWatch(http, WATCH_INACTIVITY_TIMEOUT_MS);
  return {
    http,
    core: coreApi(http),
    custom: customApi(http),
    coordination: coordinationApi(http),
    apps: appsApi(http),
    watch,
  };
}
