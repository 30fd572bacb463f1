/**
 * A real Kubernetes node for tests: a stock Debian 6.12 kernel under QEMU (test/kernel/vm.ts)
 * running containerd 2 + runc, the bridge CNI and a real kubelet (guest/node.sh), registered with
 * the control plane on the host.
 *
 * Network: QEMU user-mode networking with `restrict=on`, so the guest reaches nothing but what is
 * forwarded: 10.0.2.100:6443 → the API server's port on 127.0.0.1, 10.0.2.101:<port> → receivers
 * on 127.0.0.1 (each connection through `socat` to that loopback port), and the kubelet's 10250
 * forwarded from a loopback port, which the API server dials through the kubelet tunnel (its
 * egress selector) for exec and logs.
 */
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { CoreV1Api } from "@kubernetes/client-node";
import { type BootResult, bootVm, findKernels, REPO_ROOT } from "../kernel/vm.ts";
import { binaryDir, binaryPath } from "./binaries.ts";
import { type ControlPlane, freePort } from "./control-plane.ts";
import type { NodeImages } from "./images.ts";
import { PAUSE_IMAGE } from "./images.ts";
import type { KubeletTunnel } from "./kubelet-tunnel.ts";
import { issueCertificate } from "./pki.ts";

export const GUEST_IP = "10.0.2.15";
export const GUEST_API = "https://10.0.2.100:6443";
/** The address at which the guest reaches the host's receivers (guestfwd). */
export const GUEST_HOST_SERVICES = "10.0.2.101";

export interface NodeGuestOptions {
  cp: ControlPlane;
  tunnel: KubeletTunnel;
  /** The loopback port the guest's API address leads to (the fault proxy's or the server's). */
  apiPort: number;
  images: NodeImages;
  name?: string;
  /** guest port on 10.0.2.101 → loopback port on the host (callback receivers). */
  services?: Record<number, number>;
  kernelSeries?: string;
  memoryMb?: number;
  onConsole?: (text: string) => void;
}

export interface NodeGuest {
  readonly name: string;
  readonly outDir: string;
  /** Resolves when the Node is Ready in the API and its images are imported; rejects if the guest stops first. */
  ready(timeoutMs?: number): Promise<void>;
  /** A log the guest writes (containerd.log, kubelet.log, output.log). */
  log(file: string): string;
  /** Runs a shell command on the node (as root, outside any container); resolves with its output. */
  exec(command: string, timeoutMs?: number): Promise<string>;
  /** Asks the node to stop and waits for the guest to power off. */
  stop(): Promise<BootResult>;
}

function containerdConfig(): string {
  return `version = 3
root = "/var/lib/containerd"
state = "/run/containerd"
[grpc]
  address = "/run/containerd/containerd.sock"
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "${PAUSE_IMAGE}"
[plugins."io.containerd.cri.v1.runtime"]
  [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
      BinaryName = "/usr/sbin/runc"
      SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "/etc/cni/net.d"
`;
}

const CNI = {
  cniVersion: "1.0.0",
  name: "hive-test",
  plugins: [
    {
      type: "bridge",
      bridge: "cni0",
      isGateway: true,
      ipMasq: true,
      ipam: { type: "host-local", ranges: [[{ subnet: "10.244.0.0/24" }]], routes: [{ dst: "0.0.0.0/0" }] },
    },
    { type: "portmap", capabilities: { portMappings: true } },
  ],
};

function kubeletConfig(dir: string): string {
  return JSON.stringify({
    apiVersion: "kubelet.config.k8s.io/v1beta1",
    kind: "KubeletConfiguration",
    authentication: {
      anonymous: { enabled: false },
      webhook: { enabled: true },
      x509: { clientCAFile: join(dir, "ca.crt") },
    },
    authorization: { mode: "Webhook" },
    cgroupDriver: "cgroupfs",
    containerRuntimeEndpoint: "unix:///run/containerd/containerd.sock",
    failSwapOn: false,
    tlsCertFile: join(dir, "kubelet-serving.crt"),
    tlsPrivateKeyFile: join(dir, "kubelet-serving.key"),
    port: 10250,
    // The node's disks are small tmpfs mounts: no eviction or image GC for them in a test.
    evictionHard: { "memory.available": "20Mi", "nodefs.available": "0%", "imagefs.available": "0%" },
    imageGCHighThresholdPercent: 100,
    imageGCLowThresholdPercent: 99,
    serializeImagePulls: false,
    resolvConf: "",
    maxPods: 30,
    nodeStatusUpdateFrequency: "5s",
  });
}

/** Certificates and configuration the guest reads from the host (the repository is shared). */
function writeNodeFiles(cp: ControlPlane, name: string, dir: string): void {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const client = issueCertificate(cp.pki.dir, `kubelet-${name}`, `/O=system:nodes/CN=system:node:${name}`, {
    usage: "client",
  });
  const serving = issueCertificate(cp.pki.dir, `kubelet-serving-${name}`, `/CN=${name}`, {
    san: `IP:${GUEST_IP},DNS:${name}`,
    usage: "server",
  });
  copyFileSync(cp.pki.files.caCert, join(dir, "ca.crt"));
  copyFileSync(client.cert, join(dir, "kubelet.crt"));
  copyFileSync(client.key, join(dir, "kubelet.key"));
  copyFileSync(serving.cert, join(dir, "kubelet-serving.crt"));
  copyFileSync(serving.key, join(dir, "kubelet-serving.key"));
  writeFileSync(
    join(dir, "kubelet.kubeconfig"),
    JSON.stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [
        { name: "hive", cluster: { server: GUEST_API, "certificate-authority": join(dir, "ca.crt") } },
      ],
      users: [
        {
          name: "kubelet",
          user: { "client-certificate": join(dir, "kubelet.crt"), "client-key": join(dir, "kubelet.key") },
        },
      ],
      contexts: [{ name: "hive", context: { cluster: "hive", user: "kubelet" } }],
      "current-context": "hive",
    }),
  );
  writeFileSync(join(dir, "containerd.toml"), containerdConfig());
  writeFileSync(join(dir, "cni.conflist"), JSON.stringify(CNI));
  writeFileSync(join(dir, "kubelet.yaml"), kubeletConfig(dir));
}

function netdev(apiPort: number, kubeletPort: number, services: Record<number, number>): string[] {
  const fwd = (guest: string, hostPort: number) =>
    `guestfwd=tcp:${guest}-cmd:socat - TCP:127.0.0.1:${hostPort}`;
  const parts = [
    "user",
    "id=n0",
    "restrict=on",
    "net=10.0.2.0/24",
    `hostfwd=tcp:127.0.0.1:${kubeletPort}-${GUEST_IP}:10250`,
    fwd("10.0.2.100:6443", apiPort),
    ...Object.entries(services).map(([g, h]) => fwd(`${GUEST_HOST_SERVICES}:${g}`, h)),
  ];
  return ["-netdev", parts.join(","), "-device", "virtio-net-pci,netdev=n0"];
}

export async function startNodeGuest(options: NodeGuestOptions): Promise<NodeGuest> {
  const name = options.name ?? "hive-node";
  const series = options.kernelSeries ?? "6.12";
  const kernel = findKernels().found.find((k) => k.series === series);
  if (!kernel) throw new Error(`kernel ${series} is not unpacked: run sh test/kernel/fetch-kernels.sh`);
  const dir = join(REPO_ROOT, ".tmp/cluster-node", `${name}-${process.pid}`);
  writeNodeFiles(options.cp, name, dir);
  const outDir = join(dir, "out");
  mkdirSync(outDir, { recursive: true });
  const kubeletPort = await freePort();
  await options.tunnel.route(`${GUEST_IP}:10250`, kubeletPort);
  const { archives } = options.images;
  const guest = bootVm({
    kernel,
    outDir,
    command: ". test/cluster/guest/node.sh",
    env: {
      HIVE_NODE_NAME: name,
      HIVE_NODE_DIR: dir,
      HIVE_CONTAINERD_BIN: binaryDir("containerd"),
      HIVE_KUBELET: binaryPath("kubelet"),
      HIVE_IMAGES: [archives.pause, archives.workload, archives.agent].join(" "),
    },
    memoryMb: options.memoryMb ?? 4096,
    timeoutMs: 3_600_000,
    qemuArgs: netdev(options.apiPort, kubeletPort, options.services ?? {}),
    ...(options.onConsole ? { onConsole: options.onConsole } : {}),
  });
  let finished: BootResult | Error | undefined;
  guest.then(
    (r) => {
      finished = r;
    },
    (e: Error) => {
      finished = e;
    },
  );
  const log = (file: string) =>
    existsSync(join(outDir, file)) ? readFileSync(join(outDir, file), "utf8") : "";
  const core = options.cp.adminKubeConfig().makeApiClient(CoreV1Api);
  let commands = 0;
  return {
    name,
    outDir,
    log,
    async ready(timeoutMs = 900_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        if (finished) {
          const why = finished instanceof Error ? finished.message : `exit ${finished.exitCode}`;
          throw new Error(
            `the node guest stopped before its Node was Ready (${why}):\n${log("output.log").slice(-3000)}\n${log("kubelet.log").slice(-3000)}`,
          );
        }
        const node = await core.readNode({ name }).catch(() => undefined);
        // Ready, and every image imported (the kubelet starts while the larger ones import).
        const isReady = node?.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True");
        if (isReady && existsSync(join(outDir, "imported"))) return;
        if (Date.now() > deadline) {
          throw new Error(
            `Node ${name} not Ready after ${timeoutMs} ms:\n${log("output.log").slice(-2000)}\n${log("kubelet.log").slice(-4000)}`,
          );
        }
        await new Promise((r) => setTimeout(r, 2000));
      }
    },
    async exec(command, timeoutMs = 120_000) {
      const base = join(outDir, `cmd-${++commands}`);
      writeFileSync(`${base}.sh.tmp`, command);
      renameSync(`${base}.sh.tmp`, `${base}.sh`);
      const deadline = Date.now() + timeoutMs;
      while (!existsSync(`${base}.rc`)) {
        if (finished || Date.now() > deadline) throw new Error(`the node did not run: ${command}`);
        await new Promise((r) => setTimeout(r, 300));
      }
      return readFileSync(`${base}.out`, "utf8");
    },
    async stop() {
      writeFileSync(join(outDir, "stop"), "");
      return guest;
    },
  };
}
