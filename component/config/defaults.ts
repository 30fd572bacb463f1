/** The defaults of the monitor's options: what a user who leaves an option out gets. */
import type { DaemonSetUpdateStrategy, Plain, ResourceRequirements, Toleration } from "../args.ts";

export const DEFAULT_NAMESPACE = "hive-system";
export const DEFAULT_POLICY = "default";
export const DEFAULT_METRICS_PORT = 9464;
export const DEFAULT_RUNTIME_SOCKET = "/run/containerd/containerd.sock";
export const DEFAULT_SPOOL_DIR = "/var/lib/hive/spool";
export const DEFAULT_CONTAINERD_ROOT = "/var/lib/containerd";
/**
 * The agent's request, from its idle RSS (test/image's guest: 123–131 MiB; the README's cluster,
 * test/e2e: 137 MiB; of which 16 MiB is the kernel's ring buffer, 52 MiB the node binary's
 * pages), with about a tenth above the highest.
 */
export const DEFAULT_RESOURCES: Plain<ResourceRequirements> = {
  requests: { cpu: "50m", memory: "144Mi" },
  limits: { memory: "512Mi" },
};
/**
 * Every taint: a node without an agent is a node whose accesses nobody reports, and taints
 * (control plane, GPU or dedicated pools, node problems) say nothing about whether its pods
 * need watching. `tolerations` replaces this to narrow it.
 */
export const DEFAULT_TOLERATIONS: Plain<Toleration>[] = [{ operator: "Exists" }];

/** Evicted last under node pressure (built into every cluster, usable in any namespace since 1.17). */
export const DEFAULT_PRIORITY_CLASS = "system-node-critical";

/** One agent pod replaced at a time: the others keep watching. */
export const DEFAULT_UPDATE_STRATEGY: Plain<DaemonSetUpdateStrategy> = {
  type: "RollingUpdate",
  rollingUpdate: { maxUnavailable: 1 },
};
