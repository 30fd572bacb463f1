/**
 * The loader role's election: an exclusive `flock` on a file of the node (by default in the
 * host's /run/hive), not a Lease. The kernel belongs to the node, and so does this lock: two
 * agents on one kernel can never both hold it, the kernel releases it the moment its holder
 * dies (SIGKILL included), and an API-server outage cannot take it away — the program stays
 * attached and alerting from the last HiveData it listed while the control plane is gone.
 * It costs the API server nothing: no Lease write per node every few seconds.
 */
import { closeSync, mkdirSync, openSync } from "node:fs";
import { basename, dirname } from "node:path";
import koffi from "koffi";
import { HiveError } from "../../api/errors.ts";
import type { Logger } from "../log.ts";

/** The loader lock of the agents pinning under `pinRoot`: /run/hive/<basename>.loader.lock. */
export function loaderLockFileFor(pinRoot: string, dir: string): string {
  return `${dir}/${basename(pinRoot)}.loader.lock`;
}

const LOCK_EX = 2;
const LOCK_NB = 4;
const EWOULDBLOCK = 11;

let flockFn: ((fd: number, operation: number) => number) | undefined;
/** libc's flock(2): Node has no binding for it. */
function flock(fd: number, operation: number): number {
  flockFn ??= koffi.load("libc.so.6").func("int flock(int fd, int operation)") as (
    fd: number,
    operation: number,
  ) => number;
  return flockFn(fd, operation);
}

/** The same shape as the Lease elector (runtime/k8s/lease.ts), so a role runs under either. */
export interface RoleElector {
  start(): void;
  stop(options?: { release?: boolean }): Promise<void>;
}

export interface NodeLockElectorOptions {
  /** The lock file (created if missing, with its directory). */
  path: string;
  /** How often a waiting agent tries again (the holder's exit frees the lock at once). */
  retryPeriodMs?: number;
  logger: Logger;
  onStartedLeading: (signal: AbortSignal) => void | Promise<void>;
  onStoppedLeading: () => void | Promise<void>;
  /** The lock file cannot be opened: the role cannot run on this node (readiness says why). */
  onLockUnavailable?: (error: HiveError) => void;
}

export class NodeLockElector implements RoleElector {
  private fd: number | undefined;
  private timer: NodeJS.Timeout | undefined;
  private role: AbortController | undefined;
  private started: Promise<void> | undefined;
  private stopped = false;
  private waitingLogged = false;

  private readonly options: NodeLockElectorOptions;

  constructor(options: NodeLockElectorOptions) {
    this.options = options;
  }

  start(): void {
    if (this.timer || this.fd !== undefined || this.stopped) return;
    this.attempt();
  }

  private attempt(): void {
    this.timer = undefined;
    if (this.stopped) return;
    const { path, logger } = this.options;
    let fd: number;
    try {
      mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
      fd = openSync(path, "a", 0o600);
    } catch (cause) {
      const error = new HiveError("PermissionDenied", "cannot open the loader lock file", {
        object: path,
        hint: "the agent needs a writable directory shared by every agent of this node (the DaemonSet mounts the host's /run/hive)",
        cause,
      });
      logger.error("loader lock unavailable; retrying", { error });
      this.options.onLockUnavailable?.(error);
      this.retry();
      return;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) !== 0) {
      const errno = koffi.errno();
      closeSync(fd);
      if (errno !== EWOULDBLOCK)
        logger.error("flock on the loader lock failed; retrying", { lock: path, errno });
      else if (!this.waitingLogged) {
        this.waitingLogged = true;
        logger.info("another agent of this node holds the loader lock; waiting", { lock: path });
      }
      this.retry();
      return;
    }
    this.fd = fd;
    this.role = new AbortController();
    logger.info("became leader", { lock: path });
    this.started = Promise.resolve(this.options.onStartedLeading(this.role.signal)).catch((error: unknown) =>
      logger.error("the role failed to start", { error }),
    );
  }

  private retry(): void {
    this.timer = setTimeout(() => this.attempt(), this.options.retryPeriodMs ?? 1000);
    this.timer.unref();
  }

  /** Ends the role, then frees the lock (always: a process that dies frees it too). */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.fd === undefined) return;
    this.role?.abort();
    // A role still opening the kernel finishes first (it checks the signal), so the next holder
    // never opens the pins beside it; a role waiting on an unreachable API server is not waited for.
    await Promise.race([this.started, new Promise((resolve) => setTimeout(resolve, 5000).unref())]);
    await this.options.onStoppedLeading();
    closeSync(this.fd); // closing the only descriptor releases the flock
    this.fd = undefined;
    this.options.logger.info("stopped leading", { lock: this.options.path });
  }
}
