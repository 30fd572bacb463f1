/**
 * The dispatcher's queues: an alert waiting for delivery (Item), the per-trap lanes that
 * keep a trap's alerts in order, and oldest-first lists of items (all of them, and per
 * destination) from which bounds drop.
 */
import type { SpoolRecord, SpoolRef } from "../spool/spool.ts";

export interface Item {
  rec: SpoolRecord;
  ref: SpoolRef | undefined;
  bytes: number;
  attempts: number;
  inFlight: boolean;
  done: boolean;
  /** The destination (callback origin) it goes to. */
  origin: string;
}

/** One trap's alerts for one destination, in production order; `head` is the next to send. */
export interface Lane {
  items: Item[];
  head: number;
  busy: boolean;
  queued: boolean;
  timer: NodeJS.Timeout | undefined;
}

export const newLane = (): Lane => ({ items: [], head: 0, busy: false, queued: false, timer: undefined });

/** The lane's first unfinished item; consumed slots are released as it goes. */
export function laneHead(lane: Lane): Item | undefined {
  while (lane.head < lane.items.length) {
    const item = lane.items[lane.head] as Item;
    if (!item.done) return item;
    lane.items[lane.head] = undefined as unknown as Item; // release for GC
    lane.head++;
  }
  if (lane.head > 0) {
    lane.items = [];
    lane.head = 0;
  }
  return undefined;
}

/** A lane that never empties would keep its consumed slots forever: cut them off now and then. */
export function trimLane(lane: Lane): void {
  if (lane.head > 1024 && lane.head * 2 > lane.items.length) {
    lane.items = lane.items.slice(lane.head);
    lane.head = 0;
  }
}

/** Items oldest first; finished ones are skipped and forgotten in bulk. */
export class ItemList {
  private items: Item[] = [];
  private head = 0;

  push(item: Item): void {
    this.items.push(item);
  }

  /**
   * Calls `drop` on unfinished items from the oldest while `more(item)` says so; returns how
   * many were dropped.
   */
  dropOldest(more: (item: Item) => boolean, drop: (item: Item) => void): number {
    let dropped = 0;
    for (let i = this.head; i < this.items.length; i++) {
      const item = this.items[i] as Item;
      if (!more(item)) break;
      if (item.done) continue;
      drop(item);
      dropped++;
    }
    while (this.head < this.items.length && (this.items[this.head] as Item).done) this.head++;
    return dropped;
  }

  /** Forgets finished items once they are most of the list; `live` = unfinished items in it. */
  compact(live: number): void {
    const held = this.items.length - this.head;
    if (held > 4096 && held > 2 * live) {
      this.items = this.items.slice(this.head).filter((i) => !i.done);
      this.head = 0;
    } else if (this.head > 4096 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
  }
}
