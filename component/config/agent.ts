/**
 * The agent's own settings: `logLevel`, `metricsPort`, the host paths it works with
 * (`runtimeSocket`, `spoolDir`, `containerdRoot` with `imageLayers`) and `legacyKernelCapabilities`.
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
  "logLevel" | "metricsPort" | "runtimeSocket" | "spoolDir" | "containerdRoot" | "legacyKernelCapabilities"
>;

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
  const legacyKernelCapabilities = args.legacyKernelCapabilities ?? false;
  c.flag("legacyKernelCapabilities", legacyKernelCapabilities);
  return {
    logLevel,
    metricsPort,
    runtimeSocket,
    spoolDir,
    // Without image layers the agent is given no containerd root at all.
    containerdRoot: imageLayers === true ? containerdRoot : undefined,
    legacyKernelCapabilities,
  };
}
