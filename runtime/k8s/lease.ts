/**
 * Leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics and one
 * stronger guarantee:
 * - a candidate takes a Lease whose holder is empty, is itself, or has not changed the record
 *   for `leaseDurationMs` as observed on the candidate's own monotonic clock (never the
 *   holder's renewTime: clocks differ between nodes);
 * - every write carries the resourceVersion it read, so two candidates cannot both win (409);
 * - the leader renews every `renewPeriodMs` (default `retryPeriodMs`) and, after a failed
 *   renewal, retries every `retryPeriodMs`; if no renewal *sent* within the last
 *   `renewDeadlineMs` has been confirmed, the role stops at that deadline — without waiting for
 *   a hung request. Others can only take over `leaseDurationMs` after the last successful
 *   write, and renewDeadlineMs < leaseDurationMs, so the old leader has always stopped first;
 * - on shutdown the role stops first, then the Lease is released (holderIdentity "") so a
 *   successor starts at once.
 */
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { type CoordinationV1Api, type V1Lease, V1MicroTime } from "@kubernetes/client-node";
import { HiveError } from "../../api/errors.ts";
import { createLogger, type Logger } from "../log.ts";
import { apiFailure, isAlreadyExists, isConflict, isNotFound } from "./api-errors.ts";

export interface LeaseTiming {
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
  /**
   * How long a holder waits after a renewal that succeeded (its idle write rate); default
   * retryPeriodMs. With a retry still possible before the deadline.
   */
  renewPeriodMs?: number;
}

/**
 * Timing from the lease duration alone: renew deadline 2/3 of it, retry period 2/15 (client-go's
 * 15/10/2 s), and a holder renewing every third of it — two attempts fit before the deadline.
 */
export function leaseTiming(leaseDurationMs: number): LeaseTiming {
  return {
    leaseDurationMs,
    renewDeadlineMs: Math.floor((leaseDurationMs * 2) / 3),
    retryPeriodMs: Math.floor((leaseDurationMs * 2) / 15),
    renewPeriodMs: Math.floor(leaseDurationMs / 3),
  };
}

/**
 * The cluster-wide pods Lease: its holder renews every 30 s (2 writes a minute), candidates poll
 * every 12 s (reads). With the kernel Lease's 15 s (loader-election.ts) an idle node writes 4
 * times a minute and the pods holder 6: at most one write per node per 10 s, the kubelet's own
 * rate. The price is a takeover within 90 s of a holder that dies without releasing (the role
 * writes status and finalizers, never alerts).
 */
export const DEFAULT_LEASE: LeaseTiming = leaseTiming(90_000);

export interface LeaderElectionOptions {
  coordination: CoordinationV1Api;
  namespace: string;
  /** Lease name (e.g. `hive-loader-<boot id>`, `hive-pods`). */
  name: string;
  /** This candidate (e.g. the pod name). */
  identity: string;
  /** How long a silent holder keeps the Lease; default 15,000 ms. */
  leaseDurationMs?: number;
  /** A leader that could not renew for this long stops; default 10,000 ms. Must be < leaseDurationMs. */
  renewDeadlineMs?: number;
  /** Pause between attempts; default 2,000 ms. Must be < renewDeadlineMs. */
  retryPeriodMs?: number;
  /** Pause after a renewal that succeeded; default retryPeriodMs (see LeaseTiming). */
  renewPeriodMs?: number;
  /** Called when this candidate becomes leader; `signal` aborts when leadership ends. */
  onStartedLeading: (signal: AbortSignal) => void | Promise<void>;
  /** Called once for each onStartedLeading, when leadership ends (lost, deadline, or stop()). */
  onStoppedLeading: () => void | Promise<void>;
  /** Called when the observed holder changes ("" = nobody). */
  onNewLeader?: (identity: string) => void;
  /**
   * Keep the role when renewals fail (the API server is unreachable): end it only when a read
   * shows that another candidate holds the Lease. For a role whose absence is worse than a
   * brief duplicate (the kernel loader: zero loaders means no alerts), never for one that must
   * not run twice.
   */
  keepRoleWhileUnconfirmed?: boolean;
  /**
   * True when another candidate's holding cannot be genuine (the loader: its node runs another
   * kernel). Such a holder is written over, and a leader never steps down for it.
   */
  isForgedHolder?: (identity: string) => Promise<boolean>;
  logger?: Logger;
}

type State = "idle" | "candidate" | "leader" | "stopped";

const JITTER = 1.2;

function microNow(): V1MicroTime {
  return new V1MicroTime(Date.now());
}

export class LeaderElector {
  private state: State = "idle";
  private readonly opts: Required<
    Pick<LeaderElectionOptions, "leaseDurationMs" | "renewDeadlineMs" | "retryPeriodMs" | "renewPeriodMs">
  > &
    LeaderElectionOptions;
  private readonly log: Logger;
  /** The record as last read or written, and when (monotonic ms) it last changed. */
  private observed: V1Lease | undefined;
  private observedAt = 0;
  private observedHolder: string | undefined;
  /** Increments on every leadership change, so a late answer from an old term is ignored. */
  private term = 0;
  private deadlineTimer: NodeJS.Timeout | undefined;
  private roleAbort: AbortController | undefined;
  private readonly lifetime = new AbortController();
  private loop: Promise<void> | undefined;
  private stopping: Promise<void> | undefined;
  /** stop() was called: the loop makes no further attempt and takes no leadership. */
  private stopRequested = false;

  constructor(options: LeaderElectionOptions) {
    const leaseDurationMs = options.leaseDurationMs ?? DEFAULT_LEASE.leaseDurationMs;
    const renewDeadlineMs = options.renewDeadlineMs ?? DEFAULT_LEASE.renewDeadlineMs;
    const retryPeriodMs = options.retryPeriodMs ?? DEFAULT_LEASE.retryPeriodMs;
    if (!(renewDeadlineMs < leaseDurationMs)) {
      throw new HiveError("ConfigInvalid", "the renew deadline must be shorter than the lease duration", {
        object: `lease ${options.namespace}/${options.name}`,
        hint: `got renewDeadlineMs=${renewDeadlineMs}, leaseDurationMs=${leaseDurationMs}`,
      });
    }
    // Also bounds the retry period alone: a renewal and a retry must both fit before the deadline.
    const renewPeriodMs = options.renewPeriodMs ?? retryPeriodMs;
    if (!((renewPeriodMs + retryPeriodMs) * JITTER < renewDeadlineMs)) {
      throw new HiveError(
        "ConfigInvalid",
        "a failed renewal must leave time for a retry before the renew deadline",
        {
          object: `lease ${options.namespace}/${options.name}`,
          hint: `need (renewPeriodMs + retryPeriodMs) × ${JITTER} < renewDeadlineMs; got renewPeriodMs=${renewPeriodMs}, retryPeriodMs=${retryPeriodMs}, renewDeadlineMs=${renewDeadlineMs}`,
        },
      );
    }
    this.opts = { ...options, leaseDurationMs, renewDeadlineMs, retryPeriodMs, renewPeriodMs };
    this.log = (options.logger ?? createLogger()).child({
      lease: `${options.namespace}/${options.name}`,
      identity: options.identity,
    });
  }

  /** Joins the election (idempotent). */
  start(): void {
    if (this.state !== "idle") return;
    this.state = "candidate";
    this.loop = this.run();
  }

  isLeader(): boolean {
    return this.state === "leader";
  }

  /** The holder last observed on the Lease ("" when released), if any read succeeded. */
  leader(): string | undefined {
    return this.observedHolder;
  }

  /**
   * Leaves the election. If leading: the role is stopped (onStoppedLeading awaited) and then,
   * unless `release: false`, the Lease is released so another candidate can start at once.
   */
  stop(options: { release?: boolean } = {}): Promise<void> {
    this.stopping ??= (async () => {
      const wasLeader = this.state === "leader";
      // Before the role's own stop, which may take a while: the loop must not take the Lease back
      // meanwhile and start a role that nothing would stop.
      this.stopRequested = true;
      if (wasLeader) await this.loseLeadership("stopping");
      this.state = "stopped";
      this.lifetime.abort();
      // Do not let a hung request hold up shutdown: the role is already stopped.
      await Promise.race([this.loop, sleep(this.opts.retryPeriodMs)]);
      if (wasLeader && (options.release ?? true)) await this.release();
    })();
    return this.stopping;
  }

  private leaseSeconds(): number {
    return Math.max(1, Math.ceil(this.opts.leaseDurationMs / 1000));
  }

  private async pause(ms: number): Promise<void> {
    try {
      await sleep(ms * (1 + Math.random() * (JITTER - 1)), undefined, { signal: this.lifetime.signal });
    } catch {
      // stop() aborted the wait
    }
  }

  private async run(): Promise<void> {
    while (!this.stopRequested && (this.state === "candidate" || this.state === "leader")) {
      const term = this.term;
      const sentAt = performance.now();
      const ok = await this.tryAcquireOrRenew();
      if (
        this.stopRequested ||
        this.term !== term ||
        (this.state !== "candidate" && this.state !== "leader")
      ) {
        // Leadership changed while the request was in flight (deadline or stop): its answer is stale.
        continue;
      }
      if (ok) {
        if (this.state === "candidate") this.becomeLeader();
        if (!this.opts.keepRoleWhileUnconfirmed) this.armDeadline(sentAt);
        await this.pause(this.opts.renewPeriodMs);
        continue;
      }
      if (
        this.state === "leader" &&
        this.observedHolder !== undefined &&
        this.observedHolder !== "" &&
        this.observedHolder !== this.opts.identity &&
        !this.forged.has(this.observedHolder)
      ) {
        // Only a holder seen on the Lease ends a role kept through failed renewals.
        await this.loseLeadership(`the lease is held by ${this.observedHolder}`);
      }
      await this.pause(this.opts.retryPeriodMs);
    }
  }

  /** The role must be over before anyone else could consider the Lease expired. */
  private armDeadline(sentAt: number): void {
    if (this.deadlineTimer) clearTimeout(this.deadlineTimer);
    const remaining = sentAt + this.opts.renewDeadlineMs - performance.now();
    this.deadlineTimer = setTimeout(
      () => {
        this.deadlineTimer = undefined;
        void this.loseLeadership("renewal not confirmed before the renew deadline");
      },
      Math.max(0, remaining),
    );
  }

  private becomeLeader(): void {
    this.state = "leader";
    this.term += 1;
    this.roleAbort = new AbortController();
    this.log.info("became leader");
    const signal = this.roleAbort.signal;
    try {
      const r = this.opts.onStartedLeading(signal);
      if (r && typeof r.catch === "function")
        r.catch((err: unknown) => this.log.error("onStartedLeading failed", { error: err }));
    } catch (err) {
      this.log.error("onStartedLeading failed", { error: err });
    }
  }

  private async loseLeadership(why: string): Promise<void> {
    if (this.state !== "leader") return;
    this.state = "candidate";
    this.term += 1;
    if (this.deadlineTimer) clearTimeout(this.deadlineTimer);
    this.deadlineTimer = undefined;
    this.roleAbort?.abort();
    this.roleAbort = undefined;
    this.log.warn("stopped leading", { reason: why });
    try {
      await this.opts.onStoppedLeading();
    } catch (err) {
      this.log.error("onStoppedLeading failed", { error: err });
    }
  }

  private observe(lease: V1Lease): void {
    const prev = this.observed;
    if (!prev || prev.metadata?.resourceVersion !== lease.metadata?.resourceVersion) {
      this.observed = lease;
      this.observedAt = performance.now();
    }
    const holder = lease.spec?.holderIdentity ?? "";
    if (holder !== this.observedHolder) {
      this.observedHolder = holder;
      if (this.opts.onNewLeader) {
        try {
          this.opts.onNewLeader(holder);
        } catch (err) {
          this.log.error("onNewLeader failed", { error: err });
        }
      }
    }
  }

  /** Holders found forged, so that a leader does not step down for them. */
  private readonly forged = new Set<string>();

  private async isForged(holder: string): Promise<boolean> {
    const check = this.opts.isForgedHolder;
    if (!check) return false;
    try {
      if (!(await check(holder))) return false;
    } catch (err) {
      // Unknown is not forged: an outage must not make candidates fight over a genuine holder.
      this.log.warn("cannot check the lease holder", { holder, error: apiFailure(err) });
      return false;
    }
    this.forged.add(holder);
    return true;
  }

  private async tryAcquireOrRenew(): Promise<boolean> {
    const { coordination, namespace, name, identity } = this.opts;
    let current: V1Lease | undefined;
    // While leading, write over the record we wrote last (one request per renewal); read on conflict.
    if (this.state === "leader" && this.observed?.spec?.holderIdentity === identity) current = this.observed;
    else {
      try {
        current = await coordination.readNamespacedLease({ name, namespace });
      } catch (err) {
        if (!isNotFound(err)) {
          this.log.warn("cannot read the lease", { error: apiFailure(err) });
          return false;
        }
      }
    }
    if (!current) {
      const now = microNow();
      try {
        const created = await coordination.createNamespacedLease({
          namespace,
          body: {
            apiVersion: "coordination.k8s.io/v1",
            kind: "Lease",
            metadata: { name, namespace },
            spec: {
              holderIdentity: identity,
              leaseDurationSeconds: this.leaseSeconds(),
              acquireTime: now,
              renewTime: now,
              leaseTransitions: 0,
            },
          },
        });
        this.observe(created);
        return true;
      } catch (err) {
        if (!isAlreadyExists(err)) this.log.warn("cannot create the lease", { error: apiFailure(err) });
        return false;
      }
    }
    if (current !== this.observed) this.observe(current);
    const holder = current.spec?.holderIdentity ?? "";
    if (
      holder !== "" &&
      holder !== identity &&
      performance.now() < this.observedAt + this.opts.leaseDurationMs
    ) {
      if (!(await this.isForged(holder))) return false; // held by another candidate within the lease duration
      this.log.warn("the lease is held by a candidate that cannot hold it; taking it over", { holder });
    }
    const now = microNow();
    const spec = current.spec ?? {};
    const body: V1Lease = {
      ...current,
      spec: {
        ...spec,
        holderIdentity: identity,
        leaseDurationSeconds: this.leaseSeconds(),
        renewTime: now,
        acquireTime: holder === identity && spec.acquireTime ? spec.acquireTime : now,
        leaseTransitions: (spec.leaseTransitions ?? 0) + (holder === identity ? 0 : 1),
      },
    };
    try {
      const updated = await coordination.replaceNamespacedLease({ name, namespace, body });
      this.observe(updated);
      return true;
    } catch (err) {
      if (isConflict(err)) {
        this.observed = undefined; // someone else wrote: read afresh next time
        this.log.debug("lease changed under us (409)");
      } else this.log.warn("cannot update the lease", { error: apiFailure(err) });
      return false;
    }
  }

  /**
   * Clears holderIdentity on the record this candidate wrote last. On a 409 the Lease is read
   * again: a renewal that stop() stopped waiting for may have been written after all, and the
   * Lease is then still ours to release; held by another, it is left alone.
   */
  private async release(): Promise<void> {
    const last = this.observed;
    if (!last || last.spec?.holderIdentity !== this.opts.identity) return;
    const { coordination, name, namespace } = this.opts;
    const writeReleased = (record: V1Lease) => {
      const now = microNow();
      return coordination.replaceNamespacedLease({
        name,
        namespace,
        body: {
          ...record,
          spec: {
            ...record.spec,
            holderIdentity: "",
            leaseDurationSeconds: 1,
            renewTime: now,
            acquireTime: now,
          },
        },
      });
    };
    try {
      try {
        await writeReleased(last);
      } catch (err) {
        if (!isConflict(err)) throw err;
        const current = await coordination.readNamespacedLease({ name, namespace });
        if (current.spec?.holderIdentity !== this.opts.identity) return;
        await writeReleased(current);
      }
      this.log.info("released the lease");
    } catch (err) {
      this.log.warn("could not release the lease; others take over after it expires", {
        error: apiFailure(err),
      });
    }
  }
}
