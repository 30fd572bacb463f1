/**
 * Connection to the Kubernetes API: a KubeConfig from the pod's service account when in a
 * cluster, from a kubeconfig file, or from a URL and token (with the CA that signed the server's
 * certificate when an https server's is not in the system's trust store), and the typed clients
 * Hive uses.
 */
import { createHash } from "node:crypto";
import { CoordinationV1Api, CoreV1Api, CustomObjectsApi, KubeConfig, Watch } from "@kubernetes/client-node";
import { HiveError } from "../../api/errors.ts";

export interface KubeConfigSource {
  /** A ready KubeConfig (wins over everything else). */
  kubeConfig?: KubeConfig;
  /** API server URL, with an optional bearer token. */
  url?: string;
  token?: string;
  /**
   * PEM file of the CA that signed an https server's certificate; default: the system's trust
   * store (and NODE_EXTRA_CA_CERTS). The server is always verified.
   */
  caFile?: string;
  /** Path of a kubeconfig file. */
  kubeconfigPath?: string;
  /** Use the pod's service account; default: when KUBERNETES_SERVICE_HOST is set. */
  inCluster?: boolean;
}

export function loadKubeConfig(
  source: KubeConfigSource = {},
  env: NodeJS.ProcessEnv = process.env,
): KubeConfig {
  if (source.kubeConfig) return source.kubeConfig;
  const kc = new KubeConfig();
  try {
    if (source.url) {
      const user = { name: "hive", ...(source.token ? { token: source.token } : {}) };
      kc.loadFromOptions({
        clusters: [
          {
            name: "target",
            server: source.url,
            skipTLSVerify: source.url.startsWith("http:"),
            ...(source.caFile ? { caFile: source.caFile } : {}),
          },
        ],
        users: [user],
        contexts: [{ name: "target", cluster: "target", user: "hive" }],
        currentContext: "target",
      });
    } else if (source.kubeconfigPath) {
      kc.loadFromFile(source.kubeconfigPath);
    } else if (source.inCluster ?? Boolean(env.KUBERNETES_SERVICE_HOST)) {
      kc.loadFromCluster();
    } else {
      kc.loadFromDefault();
    }
  } catch (err) {
    throw new HiveError("ConfigInvalid", "cannot load the Kubernetes client configuration", {
      object: source.url ?? source.kubeconfigPath ?? "in-cluster service account",
      hint: "run inside a pod with a service account, or pass --kubeconfig / a server URL",
      cause: err,
    });
  }
  if (!kc.getCurrentCluster()) {
    throw new HiveError("ConfigInvalid", "the Kubernetes client configuration names no cluster", {
      object: source.kubeconfigPath ?? "default kubeconfig",
      hint: "set a current-context that points at a cluster",
    });
  }
  return kc;
}

type DispatcherFactory = (
  cluster: { server?: string; proxyUrl?: string } | null,
  options: Record<string, unknown>,
) => unknown;

/**
 * client-node 2.0.1 builds a new undici Agent — so a new TCP (and TLS) connection — for every
 * request (KubeConfig.applySecurityAuthentication → createDispatcher), and never closes it.
 * This makes requests through `kc` share one dispatcher per distinct TLS setting, so they reuse
 * keep-alive connections. It patches that one private method on this instance only; if a
 * client-node release renames it, the function does nothing and requests work as before.
 */
export function shareConnections(kc: KubeConfig): KubeConfig {
  const target = kc as unknown as { createDispatcher?: DispatcherFactory; hiveSharedDispatchers?: boolean };
  if (typeof target.createDispatcher !== "function" || target.hiveSharedDispatchers) return kc;
  const original = target.createDispatcher.bind(kc);
  const cache = new Map<string, unknown>();
  target.createDispatcher = (cluster, options) => {
    const { ca, cert, key, pfx, passphrase, rejectUnauthorized, servername } = options;
    const id = createHash("sha256")
      .update(
        JSON.stringify([
          cluster?.server,
          cluster?.proxyUrl,
          ca,
          cert,
          key,
          pfx,
          passphrase,
          rejectUnauthorized,
          servername,
        ]),
      )
      .digest("hex");
    if (!cache.has(id)) cache.set(id, original(cluster, options));
    return cache.get(id);
  };
  target.hiveSharedDispatchers = true;
  return kc;
}

export interface KubeClients {
  kubeConfig: KubeConfig;
  core: CoreV1Api;
  custom: CustomObjectsApi;
  coordination: CoordinationV1Api;
  watch: Watch;
}

/**
 * How long a watch may deliver nothing before the client gives up on its connection (a dead peer
 * sends no FIN). kube-apiserver's watch cache writes nothing on a quiet watch between BOOKMARKs,
 * which come about a minute apart (the first after up to two): client-node's default of 30 s cut
 * every quiet watch twice a minute. A healthy watch ends at its own timeoutSeconds instead.
 */
export const WATCH_INACTIVITY_TIMEOUT_MS = 180_000;

/** A Watch whose inactivity timeout is WATCH_INACTIVITY_TIMEOUT_MS. */
function quietTolerantWatch(kubeConfig: KubeConfig): Watch {
  const watch = new Watch(kubeConfig);
  // client-node declares the field private; it is the only way to set the timeout.
  (watch as unknown as { requestTimeoutMs: number }).requestTimeoutMs = WATCH_INACTIVITY_TIMEOUT_MS;
  return watch;
}

/** Typed clients over one KubeConfig; connections are shared (see shareConnections) unless disabled. */
export function createKubeClients(
  source: KubeConfigSource & { shareConnections?: boolean } = {},
): KubeClients {
  const kubeConfig = loadKubeConfig(source);
  if (source.shareConnections ?? true) shareConnections(kubeConfig);
  return {
    kubeConfig,
    core: kubeConfig.makeApiClient(CoreV1Api),
    custom: kubeConfig.makeApiClient(CustomObjectsApi),
    coordination: kubeConfig.makeApiClient(CoordinationV1Api),
    watch: quietTolerantWatch(kubeConfig),
  };
}
