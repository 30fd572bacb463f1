/**
 * What waits for delivery: its count and bytes (in all and per destination), finishing an
 * alert (acknowledged in the spool), waking those waiting for it all to be delivered, the
 * pending gauges, and dropping the oldest to stay in a bound.
 *
 * Bounds: the spool's (../spool/spool-segments.ts: per destination, then fair share) or, without a
 * spool, `maxPendingBytes` with the same rule: a destination over `destinationQuotaBytes`
 * loses its own oldest (destination_quota); when all together are over the bound, the
 * destination holding the most loses its oldest (spool_full). One dead callback cannot
 * evict the smaller backlog of another.
 */
import { HiveError } from "../../../api/errors.ts";
import type { Logger } from "../../log.ts";
import type { DropReason, HiveMetrics } from "../../metrics/metrics.ts";
import type { SegmentDrop, Spool } from "../spool/spool.ts";
import type { Item } from "./delivery-queue.ts";
import type { Destination } from "./delivery-scheduler.ts";

export interface BacklogOptions {
  logger: Logger;
  metrics: HiveMetrics;
  spool: Spool | undefined;
  /** Memory bound without a spool. */
  maxPendingBytes: number;
  /** Without a spool: undelivered bytes one destination may hold. */
  quotaBytes: number;
  destinations: ReadonlyMap<string, Destination>;
}

export class DeliveryBacklog {
  /** Alerts neither delivered nor given up. */
  count = 0;
  private bytes = 0;
  private waiters: (() => void)[] = [];
  private readonly options: BacklogOptions;

  constructor(options: BacklogOptions) {
    this.options = options;
  }

  add(dest: Destination, item: Item): void {
    dest.items.compact(dest.pendingCount);
    dest.items.push(item);
    this.count++;
    this.bytes += item.bytes;
    dest.pendingCount++;
    dest.pendingBytes += item.bytes;
  }

  /** Delivered or given up: acknowledged in the spool, no longer counted. */
  complete(item: Item): void {
    if (item.done) return;
    item.done = true;
    // A finished item may stay referenced for a while (a lane waiting out a backoff keeps
    // its queue): release the body now so only a small shell remains.
    if (item.rec.body !== "") item.rec = { ...item.rec, body: "" };
    this.count--;
    this.bytes -= item.bytes;
    const dest = this.options.destinations.get(item.origin);
    if (dest) {
      dest.pendingCount--;
      dest.pendingBytes -= item.bytes;
    }
    const { spool } = this.options;
    if (item.ref && spool) spool.ack(item.ref);
    if (this.count === 0) {
      const w = this.waiters;
      this.waiters = [];
      for (const resolve of w) resolve();
    }
  }

  /** Resolves when nothing waits, or after timeoutMs (false). */
  idle(timeoutMs: number | undefined): Promise<boolean> {
    if (this.count === 0) return Promise.resolve(true);
    return new Promise<boolean>((resolve) => {
      const timer = timeoutMs === undefined ? undefined : setTimeout(() => resolve(false), timeoutMs);
      this.waiters.push(() => {
        clearTimeout(timer);
        resolve(true);
      });
    });
  }

  updateGauges(): void {
    const { spool, metrics } = this.options;
    if (spool) {
      const s = spool.stats();
      metrics.pendingAlerts.set(s.pending);
      metrics.spoolBytes.set(s.bytes);
      metrics.spoolCapacityBytes.set(spool.maxBytes);
    } else {
      metrics.pendingAlerts.set(this.count);
      metrics.spoolBytes.set(this.bytes);
      metrics.spoolCapacityBytes.set(this.options.maxPendingBytes);
    }
  }

  /** Without a spool: drops the oldest alerts until `bytes` more of `dest` fit both bounds. */
  makeRoom(dest: Destination, bytes: number): void {
    const { maxPendingBytes, quotaBytes } = this.options;
    while (this.bytes + bytes > maxPendingBytes) {
      // The destination holding the most gives up its oldest.
      let largest: Destination | undefined;
      for (const d of this.options.destinations.values())
        if (!largest || d.pendingBytes > largest.pendingBytes) largest = d;
      if (!largest || largest.pendingCount === 0) break;
      if (this.dropOldestOf(largest, this.bytes + bytes - maxPendingBytes, "spool_full", false) === 0) break;
    }
    // Makes room in the destination's quota by dropping its own oldest.
    if (dest.pendingBytes + bytes <= quotaBytes) return;
    this.dropOldestOf(dest, dest.pendingBytes + bytes - quotaBytes, "destination_quota", true);
  }

  /** The spool dropped a segment of a destination: its items of that segment and older go with it. */
  segmentDropped(drop: SegmentDrop): void {
    // The spool drops a destination's segments oldest first.
    const dest = this.options.destinations.get(drop.stream);
    const dropped =
      dest?.items.dropOldest(
        (item) => item.ref === undefined || item.ref.segment <= drop.segment,
        (item) => this.drop(item, false),
      ) ?? 0;
    this.reportDrops(dropped, drop.reason, drop.stream);
  }

  /** An item dropped by a bound; `keepSpoolRecord` false: its spool record is gone already. */
  private drop(item: Item, keepSpoolRecord: boolean): void {
    // An in-flight alert is dropped too; if that request still succeeds it is also counted
    // as delivered, since it did arrive.
    if (!keepSpoolRecord) item.ref = undefined;
    this.complete(item);
  }

  /**
   * Drops the destination's oldest alerts until `bytes` are freed, counted under `reason`;
   * `acknowledge`: given up in the spool too, so that its segment can be deleted.
   */
  private dropOldestOf(
    dest: Destination,
    bytes: number,
    reason: "destination_quota" | "spool_full",
    acknowledge: boolean,
  ): number {
    let free = bytes;
    const dropped = dest.items.dropOldest(
      () => free > 0,
      (item) => {
        free -= item.bytes;
        this.drop(item, acknowledge);
      },
    );
    this.reportDrops(dropped, reason, dest.origin);
    return dropped;
  }

  private reportDrops(dropped: number, reason: DropReason, destination?: string): void {
    if (dropped === 0) return;
    this.options.metrics.alertsDropped.inc({ reason }, dropped);
    const quota = reason === "destination_quota";
    this.options.logger.error(
      quota
        ? "alert callback's backlog reached its quota: its oldest undelivered alerts dropped"
        : "alert spool full: oldest undelivered alerts dropped",
      {
        error: new HiveError(
          "SpoolFull",
          quota ? "destination quota reached" : "alert spool reached its size bound",
          {
            hint: "the callbacks have been unreachable for long; raise the spool size or fix the receiver",
            dropped,
            ...(destination ? { destination } : {}),
          },
        ),
      },
    );
  }
}
