/**
 * The agent's own settings: `logLevel`, `metricsPort`, the host paths it works with
 * (`runtimeSocket`, `spoolDir`, `containerdRoot` with `imageLayers`), `legacyKernelCapabilities` and
 * `sharedKernels`.
 */
import { type HiveMonitorValues, LOG_LEVELS } from "../args.ts";
import type { Checker } from "./checker.ts";
import {
  DEFAULT_CONTAINERD_ROOT,
  DEFAULT_METRICS_PORT,
  DEFAULT_RUNTIME_SOCKET,
  DEFAULT_SPOOL_DIR,
} from "./defaults.ts";
import type { HiveConfig } from "./hive-config.ts";

type AgentOptions = Pick<
  HiveConfig,
  | "logLevel"
  | "metricsPort"
  | "runtimeSocket"
  | "spoolDir"
  | "containerdRoot"
  | "legacyKernelCapabilities"
  | "sharedKernels"
>;

/** k3s's and RKE2's containerd socket; their containerd roots are their own. */
const K3S_SOCKET = "/run/k3s/containerd/containerd.sock";
const CRIO_SOCKETS = ["/run/crio/crio.sock", "/var/run/crio/crio.sock"];

/**
 * Image layers mount containerd's root as a hostPath that must exist: on a node whose runtime
 * keeps it elsewhere the agent's pod would never start, and an upgrade would strand the node
 * without an agent. Runtimes known to do so are refused here, before anything is rolled out.
 */
function checkLayerRoot(c: Checker, runtimeSocket: string, containerdRoot: string | undefined): void {
  if (CRIO_SOCKETS.includes(runtimeSocket)) {
    c.add(
      "imageLayers",
      "the runtime socket is CRI-O's, which keeps no containerd snapshots: set imageLayers: false (traps are then armed once each container runs)",
    );
  } else if (runtimeSocket === K3S_SOCKET && containerdRoot === undefined) {
    c.add(
      "containerdRoot",
      `the runtime socket is k3s's or RKE2's, whose containerd root is not ${DEFAULT_CONTAINERD_ROOT} (the agent's pod would never start): set containerdRoot to /var/lib/rancher/k3s/agent/containerd (k3s) or /var/lib/rancher/rke2/agent/containerd (RKE2), or imageLayers: false`,
    );
  }
}

export function checkAgentOptions(c: Checker, args: HiveMonitorValues): AgentOptions {
  const logLevel = args.logLevel ?? "info";
  c.oneOf("logLevel", logLevel, LOG_LEVELS);
  const metricsPort = args.metricsPort ?? DEFAULT_METRICS_PORT;
  if (!Number.isInteger(metricsPort) || metricsPort < 1 || metricsPort > 65535) {
    c.add("metricsPort", `${JSON.stringify(metricsPort)} must be a port number from 1 to 65535`);
  }
  const runtimeSocket = args.runtimeSocket ?? DEFAULT_RUNTIME_SOCKET;
  c.hostPath("runtimeSocket", runtimeSocket);
  const spoolDir = args.spoolDir ?? DEFAULT_SPOOL_DIR;
  c.hostPath("spoolDir", spoolDir);
  const imageLayers = args.imageLayers ?? true;
  c.flag("imageLayers", imageLayers);
  const containerdRoot = args.containerdRoot ?? DEFAULT_CONTAINERD_ROOT;
  c.hostPath("containerdRoot", containerdRoot);
  if (imageLayers === true) checkLayerRoot(c, runtimeSocket, args.containerdRoot);
  const legacyKernelCapabilities = args.legacyKernelCapabilities ?? false;
  c.flag("legacyKernelCapabilities", legacyKernelCapabilities);
  const sharedKernels = args.sharedKernels ?? false;
  c.flag("sharedKernels", sharedKernels);
  return {
    logLevel,
    metricsPort,
    runtimeSocket,
    spoolDir,
    // Without image layers the agent is given no containerd root at all.
    containerdRoot: imageLayers === true ? containerdRoot : undefined,
    legacyKernelCapabilities,
    sharedKernels,
  };
}
