/**
 * Who loads a kernel's program. Two locks, for two different rivals:
 * - the node-local lock (node-lock.ts): agents of one node (an update's old and new pod) —
 *   freed by the kernel the moment its holder dies;
 * - the kernel's Lease (`hive-loader-<boot id>`): nodes that share a kernel (kind, declared by
 *   `sharedKernels`; otherwise any other node's holding is forged, kernel-nodes.ts) — and kept
 *   through failed renewals: an API-server outage never ends the role, only another holder
 *   seen on the Lease does. Zero loaders never follows from an outage; at worst two nodes of
 *   one shared kernel both report until the second one sees the Lease again.
 * The holder renews the Lease every 15 s (other nodes of a shared kernel poll it every 12 s):
 * with the pods Lease (lease.ts DEFAULT_LEASE) the agent's only periodic writes, at most the
 * kubelet's own node-lease rate (one per 10 s) on the node holding both.
 */
import type { HiveError } from "../../api/errors.ts";
import type { KubeClients } from "../k8s/kube-client.ts";
import { type LeaderElectionOptions, LeaderElector, type LeaseTiming } from "../k8s/lease.ts";
import type { Logger } from "../log.ts";
import type { NodeKernelCheck } from "./kernel-nodes.ts";
import { NodeLockElector, type RoleElector } from "./node-lock.ts";

export const LOADER_LEASE_PREFIX = "hive-loader-";
export const LOADER_LEASE_TIMING: LeaseTiming = {
  leaseDurationMs: 48_000,
  renewDeadlineMs: 36_000,
  retryPeriodMs: 12_000,
  renewPeriodMs: 15_000,
};

/** The identity an agent holds Leases under: admission binds both parts to its pod-bound token. */
export function agentIdentity(nodeName: string, podName: string): string {
  return `${nodeName}/${podName}`;
}

/** A kernel Lease's holder is forged unless its node reports the kernel (kernel-nodes.ts). */
export function forgedKernelHolder(reportsKernel: NodeKernelCheck): (identity: string) => Promise<boolean> {
  return async (identity) => {
    const slash = identity.indexOf("/");
    if (slash <= 0) return true; // not an agent's identity
    return !(await reportsKernel(identity.slice(0, slash)));
  };
}

/**
 * Also taken over at once: another agent of this very node. The node lock, held by the caller,
 * proves it is not loading any more (an update's old pod, or a killed one), so its Lease need
 * not run out first.
 */
export function supersededOrForged(
  node: string,
  reportsKernel: NodeKernelCheck,
): (identity: string) => Promise<boolean> {
  const forged = forgedKernelHolder(reportsKernel);
  return async (identity) => identity.startsWith(`${node}/`) || forged(identity);
}

/**
 * A resumed loader ends when another node genuinely holds its kernel's Lease. When that cannot be
 * checked (the holder's Node unreadable), the loader keeps reading the ring: never a rejection,
 * which would end the agent's process.
 */
export async function endIfGenuinelyHeld(
  holder: string,
  notGenuine: (identity: string) => Promise<boolean>,
  running: () => boolean,
  stopRole: () => Promise<void>,
  logger: Pick<Logger, "warn">,
): Promise<void> {
  try {
    if ((await notGenuine(holder)) || !running()) return;
    logger.warn("another node holds this kernel's Lease; ending the resumed loader", { holder });
    await stopRole();
  } catch (error) {
    logger.warn("cannot check the new holder of this kernel's Lease; the resumed loader keeps running", {
      holder,
      error,
    });
  }
}

export interface LoaderElectorOptions
  extends Pick<LeaderElectionOptions, "onStartedLeading" | "onStoppedLeading"> {
  clients: KubeClients;
  namespace: string;
  identity: string;
  kernelId: string;
  lockPath: string;
  lease?: Partial<LeaseTiming>;
  /** Whether another node runs this kernel (kernel-nodes.ts). */
  nodeReportsKernel: NodeKernelCheck;
  logger: Logger;
  onLockUnavailable?: (error: HiveError) => void;
  /**
   * True when this node's last loader left its kernel's program and routing pinned (a restart):
   * the role then resumes on the node lock alone, at once, the API server reachable or not;
   * the Lease is taken as soon as it can be, and a genuine holder on another node ends the role.
   */
  resumable?: () => boolean;
}

export class LoaderElector implements RoleElector {
  private readonly lock: NodeLockElector;
  private lease: LeaderElector | undefined;
  private release = true;
  /** The role runs (from the Lease, or resumed on the lock alone) and has not been stopped. */
  private running = false;
  private roleAbort: AbortController | undefined;

  constructor(options: LoaderElectorOptions) {
    const { logger } = options;
    const reportsKernel = options.nodeReportsKernel;
    const node = options.identity.slice(0, options.identity.indexOf("/"));
    const notGenuine = supersededOrForged(node, reportsKernel);
    const startRole = async (signal: AbortSignal) => {
      if (this.running) return;
      this.running = true;
      await options.onStartedLeading(signal);
    };
    const stopRole = async () => {
      if (!this.running) return;
      this.running = false;
      this.roleAbort?.abort();
      await options.onStoppedLeading();
    };
    this.lock = new NodeLockElector({
      path: options.lockPath,
      logger,
      ...(options.onLockUnavailable ? { onLockUnavailable: options.onLockUnavailable } : {}),
      onStartedLeading: (lockSignal) => {
        const resumed = options.resumable?.() ?? false;
        if (resumed) {
          logger.info("resuming this node's loader from its pinned state, before the kernel Lease", {});
          this.roleAbort = new AbortController();
          void startRole(AbortSignal.any([lockSignal, this.roleAbort.signal]));
        }
        this.lease = new LeaderElector({
          coordination: options.clients.coordination,
          namespace: options.namespace,
          name: `${LOADER_LEASE_PREFIX}${options.kernelId}`,
          identity: options.identity,
          ...LOADER_LEASE_TIMING,
          // A timing given without a renew period renews at its own retry period.
          ...(options.lease
            ? { renewPeriodMs: options.lease.retryPeriodMs ?? LOADER_LEASE_TIMING.retryPeriodMs }
            : {}),
          ...options.lease,
          keepRoleWhileUnconfirmed: true,
          isForgedHolder: notGenuine,
          logger,
          onStartedLeading: (signal) => startRole(signal),
          onStoppedLeading: () => stopRole(),
          // A resumed role ends when another node genuinely holds the kernel's Lease.
          onNewLeader: (holder) => {
            if (!this.running || holder === "" || holder === options.identity) return;
            void endIfGenuinelyHeld(holder, notGenuine, () => this.running, stopRole, logger);
          },
        });
        this.lease.start();
      },
      onStoppedLeading: async () => {
        await this.lease?.stop({ release: this.release });
        this.lease = undefined;
        await stopRole();
      },
    });
  }

  start(): void {
    this.lock.start();
  }

  /** The kernel Lease's holder as last seen, while this agent holds the node lock (else undefined). */
  kernelHolder(): string | undefined {
    return this.lease?.leader();
  }

  /** Ends the role, releases the Lease (unless `release: false`, as a crash would), frees the lock. */
  async stop(options: { release?: boolean } = {}): Promise<void> {
    this.release = options.release ?? true;
    await this.lock.stop();
  }
}
