/** Client configuration and connection reuse, against a real kube-apiserver behind the fault proxy. */
import { mkdtempSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { createServer as createHttpServer } from "node:http";
import { type AddressInfo, createServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CoreV1Api, RbacAuthorizationV1Api } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isHiveError } from "../../api/errors.ts";
import { issueCertificate } from "../../test/cluster/pki.ts";
import { type RealApi, startRealApi } from "../../test/cluster/real-api.ts";
import type { CoreApi } from "./kube-apis.ts";
import { createKubeClients } from "./kube-client.ts";
import { loadConnection } from "./kube-connection.ts";
import { KubeHttp } from "./kube-http.ts";

let api: RealApi;
/** The cluster CA's certificate file: what verifies the server an https URL names. */
let caFile: string;
/** A real ServiceAccount token (TokenRequest) for default/node-7, allowed to list namespaces. */
let token: string;
/** Another one, for default/node-8 (same rights): a rotated token names another user. */
let otherToken: string;
const dir = mkdtempSync(join(tmpdir(), "hive-kube-client-"));

beforeAll(async () => {
  api = await startRealApi({ controllerManager: false });
  caFile = api.cp.pki.files.caCert;
  const admin = api.kubeConfig();
  const core = admin.makeApiClient(CoreV1Api);
  for (const name of ["node-7", "node-8"])
    await core.createNamespacedServiceAccount({ namespace: "default", body: { metadata: { name } } });
  const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
  await rbac.createClusterRole({
    body: {
      metadata: { name: "list-namespaces" },
      rules: [{ apiGroups: [""], resources: ["namespaces"], verbs: ["list"] }],
    },
  });
  await rbac.createClusterRoleBinding({
    body: {
      metadata: { name: "node-7-lists-namespaces" },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "list-namespaces" },
      subjects: ["node-7", "node-8"].map((name) => ({ kind: "ServiceAccount", namespace: "default", name })),
    },
  });
  const issue = async (name: string) =>
    (
      await core.createNamespacedServiceAccountToken({
        namespace: "default",
        name,
        body: {
          spec: { audiences: ["https://kubernetes.default.svc.cluster.local"], expirationSeconds: 3600 },
        },
      })
    ).status?.token ?? "";
  token = await issue("node-7");
  otherToken = await issue("node-8");
});
afterAll(async () => {
  await api?.stop();
});

describe("kube-client", () => {
  it("connects by URL and token; the token is the user the server sees", async () => {
    const clients = createKubeClients({ url: api.url, token, caFile });
    await clients.core.listNamespace();
    const user = "system:serviceaccount:default:node-7";
    expect(api.requests.at(-1)).toMatchObject({ verb: "list", resource: "namespaces", user, code: 200 });
    const review = (await clients.http.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", {
      body: { apiVersion: "authentication.k8s.io/v1", kind: "SelfSubjectReview" },
    })) as { status?: { userInfo?: { username?: string } } };
    expect(review.status?.userInfo?.username).toBe(user);
  });

  it("verifies the server an https URL names: a certificate its CA did not sign is refused", async () => {
    const { core } = createKubeClients({ url: api.url, token });
    const err = await core.listNamespace().catch((e: unknown) => e);
    expect(String((err as { cause?: unknown }).cause ?? err)).toMatch(/certificate/i);
  });

  it("reuses connections across requests (client-node's own clients open one per request)", async () => {
    const count = async (core: CoreApi) => {
      const before = api.connectionCount();
      for (let i = 0; i < 10; i++) await core.listNamespace();
      return api.connectionCount() - before;
    };
    expect(await count(api.cp.kubeConfig(token, api.url).makeApiClient(CoreV1Api))).toBe(10);
    expect(await count(createKubeClients({ url: api.url, token, caFile }).core)).toBeLessThanOrEqual(2);
  });

  it("reads a kubeconfig file: its current context's cluster, CA file (relative to it) and token", async () => {
    writeFileSync(join(dir, "ca.crt"), readCa());
    const path = join(dir, "kubeconfig");
    writeFileSync(path, kubeconfig({ "certificate-authority": "ca.crt" }, { token: otherToken }));
    await createKubeClients({ kubeconfigPath: path }).core.listNamespace();
    expect(api.requests.at(-1)).toMatchObject({ user: "system:serviceaccount:default:node-8", code: 200 });
  });

  it("authenticates by a client certificate from a kubeconfig (data inline), straight to the API server", async () => {
    const pair = issueCertificate(
      api.cp.pki.dir,
      "hive-client-test",
      "/CN=system:node:node-c/O=system:nodes",
      {
        usage: "client",
      },
    );
    const path = join(dir, "kubeconfig-cert");
    const data = (file: string) => Buffer.from(readFileSync(file)).toString("base64");
    writeFileSync(
      path,
      kubeconfig(
        { server: api.cp.url, "certificate-authority-data": data(caFile) },
        { "client-certificate-data": data(pair.cert), "client-key-data": data(pair.key) },
      ),
    );
    const { http } = createKubeClients({ kubeconfigPath: path });
    const review = (await http.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", {
      body: { apiVersion: "authentication.k8s.io/v1", kind: "SelfSubjectReview" },
    })) as { status?: { userInfo?: { username?: string; groups?: string[] } } };
    expect(review.status?.userInfo).toMatchObject({ username: "system:node:node-c" });
    expect(review.status?.userInfo?.groups).toContain("system:nodes");
  });

  it("sends the rotated token once the token file is replaced (as the kubelet rotates a projected token)", async () => {
    const tokenFile = join(dir, "token");
    writeFileSync(tokenFile, token);
    const path = join(dir, "kubeconfig-tokenfile");
    writeFileSync(
      path,
      kubeconfig({ "certificate-authority-data": Buffer.from(readCa()).toString("base64") }, { tokenFile }),
    );
    const { core } = createKubeClients({ kubeconfigPath: path });
    await core.listNamespace();
    expect(api.requests.at(-1)).toMatchObject({ user: "system:serviceaccount:default:node-7", code: 200 });
    writeFileSync(`${tokenFile}.new`, otherToken);
    renameSync(`${tokenFile}.new`, tokenFile);
    await core.listNamespace();
    expect(api.requests.at(-1)).toMatchObject({ user: "system:serviceaccount:default:node-8", code: 200 });
  });

  it("refuses a kubeconfig whose user is an exec plugin, naming the file", () => {
    const path = join(dir, "kubeconfig-exec");
    writeFileSync(path, kubeconfig({ "certificate-authority": "ca.crt" }, { exec: { command: "aws" } }));
    expect(() => loadConnection({ kubeconfigPath: path })).toThrow(/exec plugin/);
    try {
      loadConnection({ kubeconfigPath: path });
    } catch (err) {
      expect(isHiveError(err, "ConfigInvalid")).toBe(true);
      expect(String((err as { object?: string }).object ?? err)).toContain(path);
    }
  });

  it("gives up a connection whose TLS handshake never comes, long before the idle timeout", async () => {
    // A peer that accepts and says nothing: without a connect limit the request waits 300 s.
    const held: Socket[] = [];
    const silent = createServer((socket) => held.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    const { port } = silent.address() as AddressInfo;
    try {
      const http = new KubeHttp({ server: `https://127.0.0.1:${port}`, token }, { connectTimeoutMs: 500 });
      const err = await http.request("GET", "/api/v1/namespaces").catch((e: unknown) => e);
      expect(err).toMatchObject({ name: "TimeoutError" });
      expect(String((err as Error).message)).toMatch(/no connection to https:\/\/127\.0\.0\.1:\d+ in 500 ms/);
      expect(held.length).toBe(1);
    } finally {
      for (const socket of held) socket.destroy();
      silent.close();
    }
  }, 20_000);

  it("follows no redirect: a 307 to another address is an error, and that address sees nothing", async () => {
    const elsewhere: string[] = [];
    const other = createHttpServer((req, res) => {
      elsewhere.push(`${req.method} ${req.url} ${req.headers.authorization ?? ""}`);
      res.end("{}");
    });
    await new Promise<void>((resolve) => other.listen(0, "127.0.0.1", resolve));
    const bouncer = createHttpServer((_req, res) => {
      res.writeHead(307, {
        location: `http://127.0.0.1:${(other.address() as AddressInfo).port}/api/v1/secrets`,
      });
      res.end();
    });
    await new Promise<void>((resolve) => bouncer.listen(0, "127.0.0.1", resolve));
    try {
      const { core } = createKubeClients({
        url: `http://127.0.0.1:${(bouncer.address() as AddressInfo).port}`,
        token,
      });
      const err = await core.listNamespace().catch((e: unknown) => e);
      expect(err).toMatchObject({ name: "KubeApiError", code: 307 });
      expect(elsewhere).toEqual([]);
    } finally {
      other.close();
      bouncer.close();
    }
  });

  it("reports a kubeconfig that cannot be loaded as ConfigInvalid", () => {
    let err: unknown;
    try {
      loadConnection({ kubeconfigPath: "/nonexistent/kubeconfig" });
    } catch (e) {
      err = e;
    }
    expect(isHiveError(err, "ConfigInvalid")).toBe(true);
  });
});

function readCa(): string {
  return readFileSync(caFile, "utf8");
}

function kubeconfig(cluster: Record<string, unknown>, user: Record<string, unknown>): string {
  return JSON.stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name: "c", cluster: { server: api.url, ...cluster } }],
    users: [{ name: "u", user }],
    contexts: [{ name: "x", context: { cluster: "c", user: "u" } }],
    "current-context": "x",
  });
}
