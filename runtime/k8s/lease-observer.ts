/**
 * What an elector knows of the Lease: the record as last read or written, when it last changed
 * on this candidate's monotonic clock, who holds it, and which holders were found forged.
 */
import { performance } from "node:perf_hooks";
import type { V1Lease } from "@kubernetes/client-node";
import type { Logger } from "../log.ts";
import { apiFailure } from "./api-errors.ts";

export interface LeaseObserverOptions {
  /** Called when the observed holder changes ("" = nobody). */
  onNewLeader?: (identity: string) => void;
  /** True when a holding cannot be genuine (see LeaderElectionOptions.isForgedHolder). */
  isForgedHolder?: (identity: string) => Promise<boolean>;
  log: Logger;
}

export class LeaseObserver {
  /** The record as last read or written; undefined after a conflict (read afresh). */
  record: V1Lease | undefined;
  /** When (monotonic ms) the record last changed resourceVersion: the start of its holder's term. */
  changedAt = 0;
  /** The holder last observed ("" when released), if any read succeeded. */
  holder: string | undefined;
  /** Holders found forged, so that a leader does not step down for them. */
  private readonly forged = new Set<string>();
  private readonly opts: LeaseObserverOptions;

  constructor(options: LeaseObserverOptions) {
    this.opts = options;
  }

  observe(lease: V1Lease): void {
    const prev = this.record;
    if (!prev || prev.metadata?.resourceVersion !== lease.metadata?.resourceVersion) {
      this.record = lease;
      this.changedAt = performance.now();
    }
    const holder = lease.spec?.holderIdentity ?? "";
    if (holder !== this.holder) {
      this.holder = holder;
      this.notifyNewLeader(holder);
    }
  }

  /** Someone else wrote the Lease: the next attempt reads it afresh. */
  forget(): void {
    this.record = undefined;
  }

  /** The holder last seen, when it is a genuine candidate other than `identity`. */
  otherHolder(identity: string): string | undefined {
    const holder = this.holder;
    if (holder === undefined || holder === "" || holder === identity || this.forged.has(holder))
      return undefined;
    return holder;
  }

  async isForged(holder: string): Promise<boolean> {
    const check = this.opts.isForgedHolder;
    if (!check) return false;
    try {
      if (!(await check(holder))) return false;
    } catch (err) {
      // Unknown is not forged: an outage must not make candidates fight over a genuine holder.
      this.opts.log.warn("cannot check the lease holder", { holder, error: apiFailure(err) });
      return false;
    }
    this.forged.add(holder);
    return true;
  }

  private notifyNewLeader(holder: string): void {
    if (!this.opts.onNewLeader) return;
    try {
      this.opts.onNewLeader(holder);
    } catch (err) {
      this.opts.log.error("onNewLeader failed", { error: err });
    }
  }
}
