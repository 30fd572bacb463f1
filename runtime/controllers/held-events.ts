/**
 * Kernel events the loader holds until its first sync of the kernel map. Before the first HiveData
 * list, absence proves nothing: an event for a file the loader does not know yet may be for a trap
 * the pinned map already holds. Without a routing snapshot every event waits; with one, only those
 * for a file it does not know. Held events stay in the ring too until routed (the kernel does not
 * consume them: KernelWatcher.holdAcks), so an agent killed meanwhile leaves them to the next one.
 * Bounded: past `max`, an event is counted lost.
 */
import type { KernelEvent, KernelWatcher } from "../kernel/contract.ts";
import { retainedEvent } from "../kernel/event-decode.ts";
import type { EventDropReason } from "../metrics/metrics.ts";

export interface HeldEventsOptions {
  kernel: KernelWatcher;
  max: number;
  /** Holds the kernel's acknowledgements from the start (no snapshot routes meanwhile). */
  holdAcksNow: boolean;
  stats: { heldEvents: number; heldEventsDropped: number };
  onEventDropped?: ((reason: EventDropReason) => void) | undefined;
}

export class HeldEvents {
  /** Undefined once the first sync released them. */
  private waiting: KernelEvent[] | undefined = [];
  private releaseAcks: (() => void) | undefined;
  private readonly o: HeldEventsOptions;

  constructor(options: HeldEventsOptions) {
    this.o = options;
    this.releaseAcks = options.holdAcksNow ? options.kernel.holdAcks?.() : undefined;
  }

  /** True until the first sync. */
  get active(): boolean {
    return this.waiting !== undefined;
  }

  /** Keeps `event` for the first sync (bounded: beyond, it is counted lost). */
  hold(event: KernelEvent): void {
    if (!this.waiting) return;
    if (this.waiting.length >= this.o.max) {
      this.o.stats.heldEventsDropped += 1;
      this.o.onEventDropped?.("hold_full");
      return;
    }
    this.releaseAcks ??= this.o.kernel.holdAcks?.();
    this.waiting.push(retainedEvent(event)); // kept past its delivery: its own bytes, not its batch
    this.o.stats.heldEvents += 1;
  }

  /** The first sync is done: routes what waits, then lets the kernel consume it. */
  release(route: (event: KernelEvent) => void): void {
    if (!this.waiting) return;
    const waiting = this.waiting;
    this.waiting = undefined;
    for (const event of waiting) route(event);
    this.releaseAcks?.();
  }
}
