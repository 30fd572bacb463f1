/**
 * A one-node Kubernetes cluster for end-to-end tests and the demo: the control plane on the host
 * (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) and the node in a stock 6.12
 * guest (node-guest.ts), with callback receivers on 127.0.0.1 that pods reach at
 * 10.0.2.101:<guest port>.
 */
import { join } from "node:path";
import { type ControlPlane, startControlPlane } from "./control-plane.ts";
import { ensureNodeImages, type NodeImages } from "./images.ts";
import { kubectl } from "./install.ts";
import { type KubeletTunnel, startKubeletTunnel } from "./kubelet-tunnel.ts";
import { GUEST_HOST_SERVICES, type NodeGuest, startNodeGuest } from "./node-guest.ts";
import { pulumiRun } from "./pulumi.ts";
import type { RunRequest, RunResult } from "./pulumi-run.ts";

const QUICKSTART = join(import.meta.dirname, "../../examples/quickstart/index.ts");

/** `pulumi up` (or preview, destroy) of the README's program with the release image and a callback of the host. */
export function quickstart(
  cluster: OneNodeCluster,
  op: RunRequest["op"],
  options: { workDir: string; stack: string; guestPort: number },
): Promise<RunResult> {
  return pulumiRun(cluster.cp, {
    op,
    program: QUICKSTART,
    workDir: options.workDir,
    stack: options.stack,
    project: "hive-quickstart",
    config: {
      "hive:image": { value: cluster.images.agent.archiveRef },
      "hive:callbackUrl": { value: cluster.serviceUrl(options.guestPort, "/hive"), secret: true },
    },
  });
}

/** The README's `kubectl run shadow-test --image=debian:bookworm-slim --labels=security=high …`, until Ready. */
export function runShadowTest(cp: ControlPlane): void {
  const args = [
    "--image=debian:bookworm-slim",
    "--labels=security=high",
    "--command",
    "--",
    "sleep",
    "infinity",
  ];
  kubectl(cp, ["run", "shadow-test", ...args]);
  kubectl(cp, ["wait", "--for=condition=Ready", "pod/shadow-test", "--timeout=600s"]);
}

export interface OneNodeCluster {
  cp: ControlPlane;
  node: NodeGuest;
  images: NodeImages;
  tunnel: KubeletTunnel;
  /** The URL a pod uses for the host's receiver behind `guestPort`. */
  serviceUrl(guestPort: number, path?: string): string;
  /** Times of the boot steps, ms. */
  timings: Record<string, number>;
  stop(): Promise<void>;
}

export async function startOneNodeCluster(options: {
  /** guest port (on 10.0.2.101) → loopback port of a receiver on the host. */
  services: Record<number, number>;
  progress?: (message: string) => void;
}): Promise<OneNodeCluster> {
  const say = options.progress ?? (() => {});
  const timings: Record<string, number> = {};
  let t = Date.now();
  const lap = (name: string) => {
    timings[name] = Date.now() - t;
    t = Date.now();
    say(`${name}: ${(timings[name] / 1000).toFixed(1)} s`);
  };
  say("images: the agent image, the pod sandbox and a Debian workload image");
  const images = await ensureNodeImages();
  lap("images");
  const tunnel = await startKubeletTunnel();
  const cp = await startControlPlane({
    extraSans: ["IP:10.0.2.100"],
    scheduler: true,
    controllers: "*",
    kubeletTunnel: tunnel.socket,
  }).catch(async (err) => {
    await tunnel.stop();
    throw err;
  });
  lap("control plane");
  let node: NodeGuest | undefined;
  try {
    say("booting the node (Linux 6.12 under QEMU: containerd, kubelet, image imports)");
    node = await startNodeGuest({ cp, tunnel, apiPort: cp.port, images, services: options.services });
    await node.ready();
    lap("node Ready");
  } catch (err) {
    await node?.stop().catch(() => undefined);
    await cp.stop();
    await tunnel.stop();
    throw err;
  }
  const ready = node;
  return {
    cp,
    node: ready,
    images,
    tunnel,
    timings,
    serviceUrl: (port, path = "/") => `http://${GUEST_HOST_SERVICES}:${port}${path}`,
    async stop() {
      await ready.stop().catch(() => undefined);
      await cp.stop();
      await tunnel.stop();
    },
  };
}
