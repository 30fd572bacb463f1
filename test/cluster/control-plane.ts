/**
 * A real Kubernetes control plane for tests, as plain processes on 127.0.0.1: etcd, kube-apiserver
 * (RBAC and Node authorization, admission with ValidatingAdmissionPolicy, ServiceAccount token
 * signing, an audit log) and, unless turned off, kube-controller-manager (garbage collection through
 * ownerReferences, namespace deletion, ServiceAccounts and their root CA ConfigMaps) and
 * kube-scheduler. The programs are the ones build-binaries.ts compiled from their Go modules.
 *
 *   const cp = await startControlPlane();
 *   const kc = cp.adminKubeConfig();          // system:masters, by a static token
 *   cp.audit.refusals()                        // requests answered 401/403/422 (audit-log.ts)
 *   await cp.stop();
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { get as httpsGet } from "node:https";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import { AuditLog } from "./audit-log.ts";
import { binaryPath } from "./binaries.ts";
import { issueCertificate, makePki, type Pki } from "./pki.ts";

export interface ControlPlaneOptions {
  /** kube-controller-manager (default on). */
  controllerManager?: boolean;
  /** kube-scheduler (default off: most tests bind pods to nodes themselves). */
  scheduler?: boolean;
  /** More names for the serving certificate (a guest reaches the server by another address). */
  extraSans?: string[];
  /** The address the API server listens on (default 127.0.0.1). */
  bindAddress?: string;
  /**
   * The API server's watch cache (default on, as in production). Off, lists and watches are served
   * by etcd itself, so a compaction (compactEtcd) makes watches from older revisions fail with 410.
   */
  watchCache?: boolean;
  /**
   * kube-controller-manager's --controllers (default every controller but the node lifecycle one:
   * without kubelets, it would taint every Node and evict the agents' Pods after five minutes).
   */
  controllers?: string;
  /**
   * The unix socket of an HTTP CONNECT proxy (kubelet-tunnel.ts) through which the API server
   * dials kubelets (its egress selector's "cluster" traffic): how it reaches a kubelet in a guest.
   */
  kubeletTunnel?: string;
}

export interface ControlPlane {
  /** https://127.0.0.1:<port> */
  readonly url: string;
  readonly port: number;
  readonly dir: string;
  /** The cluster CA certificate (PEM), which signs the serving certificate. */
  readonly caPem: string;
  readonly pki: Pki;
  readonly adminToken: string;
  readonly audit: AuditLog;
  /** A KubeConfig for `token` (default: the admin's) at `server` (default: this server). */
  kubeConfig(token?: string, server?: string): KubeConfig;
  adminKubeConfig(): KubeConfig;
  /** The same as a kubeconfig file, for kubectl and the Pulumi provider. */
  writeKubeconfig(path: string, token?: string, server?: string): string;
  /** The etcd client URL (compaction, inspection). */
  readonly etcdUrl: string;
  /** Compacts etcd at its current revision: older resourceVersions are gone from storage. */
  compactEtcd(): Promise<number>;
  /** Output of one component ("etcd", "kube-apiserver", …), for a failing test's message. */
  logOf(component: string): string;
  stop(): Promise<void>;
}

// The control plane dies with the test process, however that ends: its programs would otherwise
// keep two cores busy for the rest of the run.
const children = new Set<ChildProcess>();
const killChildren = () => {
  for (const c of children) c.kill("SIGKILL");
};
process.once("exit", killChildren);
for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"] as const) {
  process.once(signal, () => {
    killChildren();
    process.kill(process.pid, signal);
  });
}

export async function freePort(host = "127.0.0.1"): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, host, () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

function startProcess(dir: string, name: string, program: string, args: string[]): ChildProcess {
  const out = openSync(join(dir, `${name}.log`), "a");
  const child = spawn(binaryPath(program), args, { stdio: ["ignore", out, out], cwd: dir });
  children.add(child);
  child.once("exit", () => children.delete(child));
  return child;
}

async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
  await exited;
  clearTimeout(timer);
}

/** Polls until `probe` resolves true; fails naming `what` and its log tail when it exits or times out. */
async function until(
  what: string,
  child: ChildProcess,
  probe: () => Promise<boolean>,
  timeoutMs: number,
  logTail: () => string,
) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await probe().catch(() => false)) return;
    if (child.exitCode !== null) throw new Error(`${what} exited (${child.exitCode}):\n${logTail()}`);
    if (Date.now() > deadline)
      throw new Error(`${what} did not become ready in ${timeoutMs} ms:\n${logTail()}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const AUDIT_POLICY = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
`;

function kubeconfigYaml(server: string, caPem: string, token: string): string {
  return JSON.stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [
      {
        name: "hive-test",
        cluster: { server, "certificate-authority-data": Buffer.from(caPem).toString("base64") },
      },
    ],
    users: [{ name: "user", user: { token } }],
    contexts: [{ name: "hive-test", context: { cluster: "hive-test", user: "user" } }],
    "current-context": "hive-test",
  });
}

async function startEtcd(dir: string): Promise<{ child: ChildProcess; url: string }> {
  const [client, peer] = [await freePort(), await freePort()];
  const url = `http://127.0.0.1:${client}`;
  const child = startProcess(dir, "etcd", "etcd", [
    `--data-dir=${join(dir, "etcd")}`,
    `--listen-client-urls=${url}`,
    `--advertise-client-urls=${url}`,
    `--listen-peer-urls=http://127.0.0.1:${peer}`,
    `--initial-advertise-peer-urls=http://127.0.0.1:${peer}`,
    `--initial-cluster=default=http://127.0.0.1:${peer}`,
    // Test data: losing it on a host crash is fine, and fsync dominates etcd's write latency.
    "--unsafe-no-fsync",
    "--log-level=warn",
  ]);
  return { child, url };
}

function apiServerArgs(
  dir: string,
  pki: Pki,
  etcdUrl: string,
  port: number,
  options: ControlPlaneOptions,
): string[] {
  const f = pki.files;
  const kubeletClient = issueCertificate(
    pki.dir,
    "apiserver-kubelet-client",
    "/O=system:masters/CN=kube-apiserver-kubelet-client",
    { usage: "client" },
  );
  return [
    `--etcd-servers=${etcdUrl}`,
    `--bind-address=${options.bindAddress ?? "127.0.0.1"}`,
    `--watch-cache=${options.watchCache ?? true}`,
    `--secure-port=${port}`,
    "--advertise-address=127.0.0.1",
    // The kubernetes Service's endpoints may not name a loopback address; nothing here needs them.
    "--endpoint-reconciler-type=none",
    `--tls-cert-file=${f.serverCert}`,
    `--tls-private-key-file=${f.serverKey}`,
    `--client-ca-file=${f.caCert}`,
    `--token-auth-file=${join(dir, "tokens.csv")}`,
    "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
    `--service-account-key-file=${f.saPub}`,
    `--service-account-signing-key-file=${f.saKey}`,
    "--api-audiences=https://kubernetes.default.svc.cluster.local",
    "--service-cluster-ip-range=10.0.0.0/24",
    "--authorization-mode=Node,RBAC",
    "--enable-admission-plugins=NodeRestriction",
    "--allow-privileged=true",
    `--audit-policy-file=${join(dir, "audit-policy.yaml")}`,
    `--audit-log-path=${join(dir, "audit.log")}`,
    "--audit-log-format=json",
    "--audit-log-mode=blocking",
    `--kubelet-client-certificate=${kubeletClient.cert}`,
    `--kubelet-client-key=${kubeletClient.key}`,
    `--kubelet-certificate-authority=${f.caCert}`,
    "--kubelet-preferred-address-types=InternalIP,Hostname",
    "--profiling=false",
    "--v=1",
    ...(options.kubeletTunnel
      ? [`--egress-selector-config-file=${egressSelector(dir, options.kubeletTunnel)}`]
      : []),
  ];
}

function egressSelector(dir: string, tunnelSocket: string): string {
  const path = join(dir, "egress-selector.yaml");
  writeFileSync(
    path,
    JSON.stringify({
      apiVersion: "apiserver.k8s.io/v1beta1",
      kind: "EgressSelectorConfiguration",
      egressSelections: [
        {
          name: "cluster",
          connection: { proxyProtocol: "HTTPConnect", transport: { uds: { udsName: tunnelSocket } } },
        },
      ],
    }),
  );
  return path;
}

function componentKubeconfig(dir: string, name: string, url: string, caPem: string, token: string): string {
  const path = join(dir, `${name}.kubeconfig`);
  writeFileSync(path, kubeconfigYaml(url, caPem, token));
  return path;
}

export async function startControlPlane(options: ControlPlaneOptions = {}): Promise<ControlPlane> {
  const dir = mkdtempSync(join(tmpdir(), "hive-cp-"));
  const pki = makePki(dir, options.extraSans);
  const caPem = readFileSync(pki.files.caCert, "utf8");
  const token = (who: string) => `${who}-${Math.random().toString(36).slice(2)}${Date.now().toString(36)}`;
  const adminToken = token("admin");
  const kcmToken = token("kcm");
  const schedToken = token("sched");
  // Static tokens for the control plane's own clients; agents and tenants get theirs elsewhere.
  writeFileSync(
    join(dir, "tokens.csv"),
    [
      `${adminToken},admin,uid-admin,"system:masters"`,
      `${kcmToken},system:kube-controller-manager,uid-kcm,"system:masters"`,
      `${schedToken},system:kube-scheduler,uid-sched`,
    ].join("\n"),
  );
  writeFileSync(join(dir, "audit-policy.yaml"), AUDIT_POLICY);
  const procs: Record<string, ChildProcess> = {};
  const logOf = (name: string) => {
    try {
      return readFileSync(join(dir, `${name}.log`), "utf8")
        .split("\n")
        .filter((l) => /^[EF]\d{4}|error|fatal/i.test(l))
        .slice(-15)
        .join("\n");
    } catch {
      return `(no ${name} log)`;
    }
  };
  const stop = async () => {
    for (const name of ["kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"]) {
      const c = procs[name];
      if (c) await stopProcess(c);
    }
    if (!process.env.HIVE_KEEP_CLUSTER) rmSync(dir, { recursive: true, force: true });
  };
  try {
    const etcd = await startEtcd(dir);
    procs.etcd = etcd.child;
    await until(
      "etcd",
      etcd.child,
      async () => (await fetch(`${etcd.url}/health`)).ok,
      30_000,
      () => logOf("etcd"),
    );
    const port = await freePort();
    const url = `https://127.0.0.1:${port}`;
    procs["kube-apiserver"] = startProcess(
      dir,
      "kube-apiserver",
      "kube-apiserver",
      apiServerArgs(dir, pki, etcd.url, port, options),
    );
    const readyz = () =>
      new Promise<boolean>((resolve) => {
        const req = httpsGet(
          `${url}/readyz`,
          { ca: caPem, headers: { authorization: `Bearer ${adminToken}` } },
          (res) => {
            res.resume();
            resolve(res.statusCode === 200);
          },
        );
        req.on("error", () => resolve(false));
      });
    await until("kube-apiserver", procs["kube-apiserver"], readyz, 90_000, () => logOf("kube-apiserver"));
    if (options.controllerManager ?? true) {
      const kubeconfig = componentKubeconfig(dir, "kcm", url, caPem, kcmToken);
      procs["kube-controller-manager"] = startProcess(
        dir,
        "kube-controller-manager",
        "kube-controller-manager",
        [
          `--kubeconfig=${kubeconfig}`,
          "--leader-elect=false",
          `--service-account-private-key-file=${pki.files.saKey}`,
          `--root-ca-file=${pki.files.caCert}`,
          "--secure-port=0",
          `--controllers=${options.controllers ?? "*,-node-lifecycle-controller"}`,
          "--concurrent-gc-syncs=5",
          "--v=1",
        ],
      );
    }
    if (options.scheduler) {
      const kubeconfig = componentKubeconfig(dir, "scheduler", url, caPem, schedToken);
      procs["kube-scheduler"] = startProcess(dir, "kube-scheduler", "kube-scheduler", [
        `--kubeconfig=${kubeconfig}`,
        `--authentication-kubeconfig=${kubeconfig}`,
        `--authorization-kubeconfig=${kubeconfig}`,
        "--leader-elect=false",
        "--secure-port=0",
      ]);
    }
    const kubeConfig = (tok = adminToken, server = url) => {
      const kc = new KubeConfig();
      kc.loadFromString(kubeconfigYaml(server, caPem, tok));
      return kc;
    };
    return {
      url,
      port,
      dir,
      caPem,
      pki,
      adminToken,
      etcdUrl: etcd.url,
      audit: new AuditLog(join(dir, "audit.log")),
      kubeConfig,
      adminKubeConfig: () => kubeConfig(),
      writeKubeconfig: (path, tok = adminToken, server = url) => {
        mkdirSync(join(path, ".."), { recursive: true });
        writeFileSync(path, kubeconfigYaml(server, caPem, tok));
        return path;
      },
      compactEtcd: () => compactEtcd(etcd.url),
      logOf,
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** etcd's JSON gateway: the current revision, then a physical compaction at it. */
async function compactEtcd(etcdUrl: string): Promise<number> {
  const key = Buffer.from("compact-probe").toString("base64");
  const range = await fetch(`${etcdUrl}/v3/kv/range`, { method: "POST", body: JSON.stringify({ key }) });
  const revision = Number(((await range.json()) as { header: { revision: string } }).header.revision);
  const res = await fetch(`${etcdUrl}/v3/kv/compaction`, {
    method: "POST",
    body: JSON.stringify({ revision, physical: true }),
  });
  if (!res.ok) throw new Error(`etcd compaction at ${revision} failed: ${res.status} ${await res.text()}`);
  return revision;
}
