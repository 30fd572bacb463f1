/**
 * Where the API server is and who the agent is to it: read from the pod's service account, a
 * kubeconfig file, a URL and token, or a client-node KubeConfig handed in (tests, tools). The
 * agent speaks to the server itself (kube-http.ts); this is all it needs to know.
 */
import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, isAbsolute, join } from "node:path";
import { parse as parseYaml } from "yaml";
import { HiveError } from "../../api/errors.ts";

export interface KubeConnection {
  /** The API server's base URL, without a trailing slash. */
  server: string;
  /** PEM of the CA that signs the server's certificate; absent: the system's trust store. */
  ca?: string;
  /** Client certificate and key (PEM), when the user is a certificate. */
  cert?: string;
  key?: string;
  /** A bearer token, fixed. */
  token?: string;
  /** A file holding the bearer token, read again as it rotates (a projected service account token). */
  tokenFile?: string;
  /** Only when a kubeconfig asks for it (an http:// server has no certificate to verify). */
  insecureSkipTLSVerify?: boolean;
  /** The name to verify the server's certificate against, when not the URL's host. */
  tlsServerName?: string;
}

/** What a client-node KubeConfig offers: the current cluster and user (no import of client-node). */
export interface KubeConfigLike {
  getCurrentCluster(): {
    server: string;
    caData?: string | undefined;
    caFile?: string | undefined;
    skipTLSVerify?: boolean | undefined;
    tlsServerName?: string | undefined;
  } | null;
  getCurrentUser(): {
    token?: string | undefined;
    certData?: string | undefined;
    certFile?: string | undefined;
    keyData?: string | undefined;
    keyFile?: string | undefined;
    exec?: unknown;
    authProvider?: unknown;
  } | null;
}

export interface KubeConfigSource {
  /** A ready client-node KubeConfig (wins over everything else). */
  kubeConfig?: KubeConfigLike;
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

const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";

/** The connection a source names; a ConfigInvalid HiveError naming the source when it cannot be read. */
export function loadConnection(
  source: KubeConfigSource = {},
  env: NodeJS.ProcessEnv = process.env,
): KubeConnection {
  const inPod = source.inCluster ?? Boolean(env.KUBERNETES_SERVICE_HOST);
  const object =
    source.url ??
    source.kubeconfigPath ??
    (source.kubeConfig
      ? "the KubeConfig given"
      : inPod
        ? "in-cluster service account"
        : defaultKubeconfig(env));
  try {
    return checked(read(source, env), object);
  } catch (err) {
    if (err instanceof HiveError) throw err;
    throw new HiveError("ConfigInvalid", "cannot load the Kubernetes client configuration", {
      object,
      hint: "run inside a pod with a service account, or pass --kubeconfig / a server URL",
      cause: err,
    });
  }
}

function read(source: KubeConfigSource, env: NodeJS.ProcessEnv): KubeConnection {
  if (source.kubeConfig) return fromKubeConfig(source.kubeConfig);
  if (source.url) return fromUrl(source.url, source.token, source.caFile);
  if (source.kubeconfigPath) return fromKubeconfigFile(source.kubeconfigPath);
  if (source.inCluster ?? Boolean(env.KUBERNETES_SERVICE_HOST)) return inCluster(env);
  return fromKubeconfigFile(defaultKubeconfig(env));
}

/** $KUBECONFIG's first file, else ~/.kube/config (as kubectl reads it). */
function defaultKubeconfig(env: NodeJS.ProcessEnv): string {
  return env.KUBECONFIG?.split(":")[0] || join(homedir(), ".kube", "config");
}

function checked(conn: KubeConnection, object: string): KubeConnection {
  let url: URL;
  try {
    url = new URL(conn.server);
  } catch (cause) {
    throw new HiveError("ConfigInvalid", `the API server URL "${conn.server}" is not a URL`, {
      object,
      hint: "set the cluster's server to https://HOST:PORT",
      cause,
    });
  }
  if (url.protocol !== "https:" && url.protocol !== "http:")
    throw new HiveError("ConfigInvalid", `the API server URL "${conn.server}" is neither https nor http`, {
      object,
      hint: "set the cluster's server to https://HOST:PORT",
    });
  return { ...conn, server: conn.server.replace(/\/+$/, "") };
}

function fromUrl(server: string, token: string | undefined, caFile: string | undefined): KubeConnection {
  return {
    server,
    ...(token ? { token } : {}),
    ...(caFile ? { ca: readFileSync(caFile, "utf8") } : {}),
  };
}

function inCluster(env: NodeJS.ProcessEnv): KubeConnection {
  const host = env.KUBERNETES_SERVICE_HOST ?? "";
  const port = env.KUBERNETES_SERVICE_PORT ?? "443";
  return {
    server: `https://${host.includes(":") ? `[${host}]` : host}:${port}`,
    ca: readFileSync(join(SERVICE_ACCOUNT_DIR, "ca.crt"), "utf8"),
    tokenFile: join(SERVICE_ACCOUNT_DIR, "token"),
  };
}

/** PEM given inline (base64, as kubeconfigs carry it) or as a file. */
function pem(data: unknown, file: string | undefined): string | undefined {
  if (typeof data === "string" && data !== "") return Buffer.from(data, "base64").toString("utf8");
  return file ? readFileSync(file, "utf8") : undefined;
}

function refuseExec(user: { exec?: unknown; authProvider?: unknown }, object: string): void {
  if (user.exec || user.authProvider)
    throw new HiveError("ConfigInvalid", "the kubeconfig's user is an exec plugin or auth provider", {
      object,
      hint: "give the agent a token, a token file or a client certificate (it runs with its pod's service account)",
    });
}

function fromKubeConfig(kc: KubeConfigLike): KubeConnection {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw noCluster("the KubeConfig given");
  const user = kc.getCurrentUser() ?? {};
  refuseExec(user, "the KubeConfig given");
  return withoutUndefined({
    server: cluster.server,
    ca: pem(cluster.caData, cluster.caFile),
    cert: pem(user.certData, user.certFile),
    key: pem(user.keyData, user.keyFile),
    token: user.token,
    insecureSkipTLSVerify: cluster.skipTLSVerify || undefined,
    tlsServerName: cluster.tlsServerName,
  });
}

type Named<T> = { name?: string } & { [k: string]: T | string | undefined };

/** A kubeconfig file (YAML or JSON): its current context's cluster and user; files relative to it. */
function fromKubeconfigFile(path: string): KubeConnection {
  const doc = (parseYaml(readFileSync(path, "utf8")) ?? {}) as Record<string, unknown>;
  const current = String(doc["current-context"] ?? "");
  const find = <T>(list: unknown, name: string, field: string): T | undefined =>
    (Array.isArray(list) ? (list as Named<T>[]) : []).find((e) => e.name === name)?.[field] as T | undefined;
  const context = find<{ cluster?: string; user?: string }>(doc.contexts, current, "context");
  const cluster = context?.cluster
    ? find<Record<string, unknown>>(doc.clusters, context.cluster, "cluster")
    : undefined;
  if (!cluster || typeof cluster.server !== "string") throw noCluster(path);
  const user =
    (context?.user ? find<Record<string, unknown>>(doc.users, context.user, "user") : undefined) ?? {};
  refuseExec({ exec: user.exec, authProvider: user["auth-provider"] }, path);
  const local = (file: unknown) =>
    typeof file === "string" ? (isAbsolute(file) ? file : join(dirname(path), file)) : undefined;
  return withoutUndefined({
    server: cluster.server,
    ca: pem(cluster["certificate-authority-data"], local(cluster["certificate-authority"])),
    cert: pem(user["client-certificate-data"], local(user["client-certificate"])),
    key: pem(user["client-key-data"], local(user["client-key"])),
    token: typeof user.token === "string" ? user.token : undefined,
    tokenFile: local(user.tokenFile),
    insecureSkipTLSVerify: cluster["insecure-skip-tls-verify"] === true || undefined,
    tlsServerName: typeof cluster["tls-server-name"] === "string" ? cluster["tls-server-name"] : undefined,
  });
}

function noCluster(object: string): HiveError {
  return new HiveError("ConfigInvalid", "the Kubernetes client configuration names no cluster", {
    object,
    hint: "set a current-context that points at a cluster with a server",
  });
}

function withoutUndefined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}
