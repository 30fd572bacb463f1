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
 * The elector's steps are named below (acquire or renew, become leader, lose leadership,
 * release); what it knows of the Lease is a LeaseObserver (lease-observer.ts), the records it
 * writes are built in lease-records.ts, its timing checked in lease-timing.ts.
 */
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import type { V1Lease } from "@kubernetes/client-node";
import { createLogger, type Logger } from "../log.ts";
import { apiFailure, isAlreadyExists, isConflict, isNotFound } from "./api-errors.ts";
import type { CoordinationApi } from "./kube-apis.ts";
import { LeaseObserver } from "./lease-observer.ts";
import {
  heldLease,
  isHeldByAnother,
  leaseSeconds,
  microNow,
  newLease,
  releasedLease,
} from "./lease-records.ts";
import { electionTiming, JITTER, type LeaseTiming } from "./lease-timing.ts";

// Moved beside the timing checks; still exported from here for the modules that import them.
export { DEFAULT_LEASE, type LeaseTiming, leaseTiming } from "./lease-timing.ts";

export interface LeaderElectionOptions {
  coordination: CoordinationApi;
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

export class LeaderElector {
  private state: State = "idle";
  private readonly opts: Required<LeaseTiming> & LeaderElectionOptions;
  private readonly log: Logger;
  private readonly lease: LeaseObserver;
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
    this.opts = { ...options, ...electionTiming(options) };
    this.log = (options.logger ?? createLogger()).child({
      lease: `${options.namespace}/${options.name}`,
      identity: options.identity,
    });
    this.lease = new LeaseObserver({
      onNewLeader: options.onNewLeader,
      isForgedHolder: options.isForgedHolder,
      log: this.log,
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
    return this.lease.holder;
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

  /** Still in the election: neither stopped nor asked to stop. */
  private isRunning(): boolean {
    return !this.stopRequested && (this.state === "candidate" || this.state === "leader");
  }

  private async pause(ms: number): Promise<void> {
    try {
      await sleep(ms * (1 + Math.random() * (JITTER - 1)), undefined, { signal: this.lifetime.signal });
    } catch {
      // stop() aborted the wait
    }
  }

  private async run(): Promise<void> {
    while (this.isRunning()) {
      const term = this.term;
      const sentAt = performance.now();
      const ok = await this.tryAcquireOrRenew();
      // Leadership changed while the request was in flight (deadline or stop): its answer is stale.
      if (!this.isRunning() || this.term !== term) continue;
      if (ok) await this.afterRenewal(sentAt);
      else await this.afterFailedAttempt();
    }
  }

  /** Holds the Lease as of `sentAt`: lead (if not yet), reset the deadline, wait a renew period. */
  private async afterRenewal(sentAt: number): Promise<void> {
    if (this.state === "candidate") this.becomeLeader();
    if (!this.opts.keepRoleWhileUnconfirmed) this.armDeadline(sentAt);
    await this.pause(this.opts.renewPeriodMs);
  }

  /** Not confirmed: a leader steps down only for a holder it saw; then wait a retry period. */
  private async afterFailedAttempt(): Promise<void> {
    const holder = this.state === "leader" ? this.lease.otherHolder(this.opts.identity) : undefined;
    // Only a holder seen on the Lease ends a role kept through failed renewals.
    if (holder !== undefined) await this.loseLeadership(`the lease is held by ${holder}`);
    await this.pause(this.opts.retryPeriodMs);
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

  /** One attempt: read (or reuse) the record, then create it, or take or renew it if we may. */
  private async tryAcquireOrRenew(): Promise<boolean> {
    const current = await this.currentRecord();
    if (current === "unreadable") return false;
    if (current === "absent") return this.create();
    if (current !== this.lease.record) this.lease.observe(current);
    if (!(await this.mayHold(current))) return false;
    return this.writeHeld(current);
  }

  /**
   * The Lease as it stands: while leading, the record we wrote last (one request per renewal; a
   * conflict reads afresh); otherwise read from the server.
   */
  private async currentRecord(): Promise<V1Lease | "absent" | "unreadable"> {
    const { coordination, namespace, name, identity } = this.opts;
    const last = this.lease.record;
    if (this.state === "leader" && last?.spec?.holderIdentity === identity) return last;
    try {
      return (await coordination.readNamespacedLease({ name, namespace })) ?? "absent";
    } catch (err) {
      if (isNotFound(err)) return "absent";
      this.log.warn("cannot read the lease", { error: apiFailure(err) });
      return "unreadable";
    }
  }

  private async create(): Promise<boolean> {
    const { coordination, namespace, name, identity } = this.opts;
    const body = newLease(
      { name, namespace, identity, leaseDurationSeconds: leaseSeconds(this.opts.leaseDurationMs) },
      microNow(),
    );
    try {
      this.lease.observe(await coordination.createNamespacedLease({ namespace, body }));
      return true;
    } catch (err) {
      if (!isAlreadyExists(err)) this.log.warn("cannot create the lease", { error: apiFailure(err) });
      return false;
    }
  }

  /** Free, ours, silent past the lease duration — or held by a candidate that cannot hold it. */
  private async mayHold(current: V1Lease): Promise<boolean> {
    const holder = current.spec?.holderIdentity ?? "";
    const { identity, leaseDurationMs } = this.opts;
    if (!isHeldByAnother(holder, identity, this.lease.changedAt, performance.now(), leaseDurationMs))
      return true;
    if (!(await this.lease.isForged(holder))) return false; // held by another candidate within the lease duration
    this.log.warn("the lease is held by a candidate that cannot hold it; taking it over", { holder });
    return true;
  }

  /** Writes `current` as held by us, over its resourceVersion: a renewal or a takeover. */
  private async writeHeld(current: V1Lease): Promise<boolean> {
    const { coordination, namespace, name, identity } = this.opts;
    const body = heldLease(current, identity, leaseSeconds(this.opts.leaseDurationMs), microNow());
    try {
      this.lease.observe(await coordination.replaceNamespacedLease({ name, namespace, body }));
      return true;
    } catch (err) {
      if (isConflict(err)) {
        this.lease.forget(); // someone else wrote: read afresh next time
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
    const last = this.lease.record;
    if (!last || last.spec?.holderIdentity !== this.opts.identity) return;
    const { coordination, name, namespace } = this.opts;
    const writeReleased = (record: V1Lease) =>
      coordination.replaceNamespacedLease({ name, namespace, body: releasedLease(record, microNow()) });
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
