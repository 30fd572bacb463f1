/**
 * Connection to the Kubernetes API: a KubeConfig from the pod's service account when in a
 * cluster, from a kubeconfig file, or from a URL and token (tests against the stand-in),
 * and the typed clients Hive uses.
 */
import { CoordinationV1Api, CoreV1Api, CustomObjectsApi, KubeConfig, Watch } from "@kubernetes/client-node";
import { HiveError } from "../errors.ts";

export interface KubeConfigSource {
  /** A ready KubeConfig (wins over everything else). */
  kubeConfig?: KubeConfig;
  /** API server URL, with an optional bearer token (no TLS verification: test servers only). */
  url?: string;
  token?: string;
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
        clusters: [{ name: "target", server: source.url, skipTLSVerify: source.url.startsWith("http:") }],
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

export interface KubeClients {
  kubeConfig: KubeConfig;
  core: CoreV1Api;
  custom: CustomObjectsApi;
  coordination: CoordinationV1Api;
  watch: Watch;
}

export function createKubeClients(source: KubeConfigSource = {}): KubeClients {
  const kubeConfig = loadKubeConfig(source);
  return {
    kubeConfig,
    core: kubeConfig.makeApiClient(CoreV1Api),
    custom: kubeConfig.makeApiClient(CustomObjectsApi),
    coordination: kubeConfig.makeApiClient(CoordinationV1Api),
    watch: new Watch(kubeConfig),
  };
}
