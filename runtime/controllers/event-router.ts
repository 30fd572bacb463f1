/**
 * Where the loader sends one kernel event, found by the file's identity in its routes
 * (event-routes.ts), never by an API call:
 * - an event on a watched directory, or a change of a trapped file's name (deleted, renamed,
 *   replaced), asks the owning node's discover to re-resolve;
 * - an access or change of a trapped file goes to the alert pipeline with the HiveData it matched
 *   and their live traps (an image layer's file: the traps that apply to the accessing container,
 *   named by its cgroup);
 * - an event for a file no route or no live trap holds is dropped and counted.
 * The decision for an access whose live traps are known is a pure step (`deliveryOf`).
 */
import type { HiveData } from "../../api/data.ts";
import type { KernelEvent, KernelWatcher } from "../kernel/contract.ts";
import type { Logger } from "../log.ts";
import type { EventDropReason } from "../metrics/metrics.ts";
import { type AttributionRetry, createAttributionRetry } from "./attribution-retry.ts";
import type { EventRoutes } from "./event-routes.ts";
import type { HeldEvents } from "./held-events.ts";
import { isLayerData } from "./hive-data.ts";
import { type AttributeAccess, type LayerRoute, quietKey, routeLayerAccess } from "./layer-routing.ts";
import { type ArmedData, trapWantsEvent } from "./live-traps.ts";

/** Where an access goes once the live traps of the HiveData it matched are known. */
export type Delivery =
  /** To these traps (those that want the event's kind are alerted). */
  | { armed: ArmedData[] }
  /** An image layer's file, accessed from a container nobody names yet: routed again a moment later. */
  | { wait: true }
  /** An image layer's file, accessed from a container no trap here applies to (or none known). */
  | { drop: Extract<LayerRoute, { dropped: string }> };

/**
 * The traps an access reaches: a HiveData of a container's own file is that container's; one of an
 * image layer's file reaches the traps that apply to the accessing container (`origin`, asked only
 * then), each as that container's HiveData (layer-routing.ts).
 */
export function deliveryOf(
  event: KernelEvent,
  armed: readonly ArmedData[],
  origin: () => ReturnType<AttributeAccess>,
  platformNamespace: string,
): Delivery {
  const layer = armed.filter((a) => isLayerData(a.data));
  if (layer.length === 0) return { armed: [...armed] };
  const routed = routeLayerAccess(event, layer, origin(), platformNamespace);
  const own = armed.filter((a) => !isLayerData(a.data));
  if ("matched" in routed) return { armed: [...own, ...routed.matched] };
  if (own.length > 0) return { armed: own };
  if (routed.dropped === "unattributed" && routed.retry) return { wait: true };
  return { drop: routed };
}

export interface EventRouterOptions {
  routes: EventRoutes;
  /** Events waiting for the first sync: an unknown key waits there while they do. */
  held: HeldEvents;
  /** The HiveData whose trap a live policy holds, each with it. */
  armed: (data: readonly HiveData[]) => ArmedData[];
  /** Asks the HiveData's node to resolve it again. */
  requestResolve: (d: HiveData) => void;
  onAccess: (event: KernelEvent, matched: readonly ArmedData[]) => void;
  onEventDropped?: ((reason: EventDropReason) => void) | undefined;
  attribute?: AttributeAccess | undefined;
  platformNamespace: string;
  kernel: KernelWatcher;
  stats: { accessEvents: number; unmatchedEvents: number; layerDropped: number };
  log: Logger;
}

export class EventRouter {
  private readonly o: EventRouterOptions;
  /** Layer accesses whose container the pod's status does not name yet (attribution-retry.ts). */
  private readonly unnamed: AttributionRetry;

  constructor(options: EventRouterOptions) {
    this.o = options;
    const { kernel, stats, log } = options;
    this.unnamed = createAttributionRetry({
      retry: (event) => this.route(event, true),
      ...(kernel.holdAcks ? { hold: () => kernel.holdAcks?.() ?? (() => undefined) } : {}),
      giveUp: () => {
        stats.layerDropped += 1;
        options.onEventDropped?.("unattributed");
      },
      onError: (error) =>
        log.error("routing a waiting layer access failed; it is counted unattributed", { error }),
    });
  }

  /** Routes one event; with `retrying`, false when its container still cannot be named (it waits on). */
  route(event: KernelEvent, retrying = false): boolean {
    const watched = this.o.routes.find(event);
    // Only with a snapshot are events routed before the first sync: one it does not know waits.
    if (!watched && this.o.held.active) {
      this.o.held.hold(event);
      return true;
    }
    if (!watched) return this.unmatched();
    if (event.kind === "parent" || watched.entry.kind === "parent") {
      for (const d of watched.data) this.o.requestResolve(d);
      return true;
    }
    // The name now names another file, or none: the trap follows it (truncation keeps the inode).
    if (event.change !== undefined && event.change !== "truncated")
      for (const d of watched.data) this.o.requestResolve(d);
    // The traps as they are now: one removed since the last sync alerts nobody.
    const armed = this.o.armed(watched.data);
    if (armed.length === 0) return this.unmatched();
    const delivery = deliveryOf(event, armed, () => this.o.attribute?.(event), this.o.platformNamespace);
    if ("wait" in delivery) {
      if (!retrying) this.unnamed.park(event);
      return false;
    }
    if ("drop" in delivery) {
      this.dropLayerAccess(event, delivery.drop);
      return true;
    }
    this.o.stats.accessEvents += 1;
    const wanted = delivery.armed.filter(({ trap }) => trapWantsEvent(trap.trap, event));
    if (wanted.length > 0) this.o.onAccess(event, wanted);
    return true;
  }

  /** Set once stopped: events delivered after that are the next agent's. */
  stopped = false;

  stop(): void {
    this.stopped = true;
    this.unnamed.stop();
  }

  private unmatched(): true {
    this.o.stats.unmatchedEvents += 1;
    this.o.onEventDropped?.("unmatched");
    return true;
  }

  private dropLayerAccess(event: KernelEvent, route: Extract<LayerRoute, { dropped: string }>): void {
    this.o.stats.layerDropped += 1;
    this.o.onEventDropped?.(route.dropped);
    // The container's next accesses to this layer alert nobody either: not events any more.
    const quiet = quietKey(event, route, this.o.routes.synced(event));
    if (quiet) this.o.kernel.quiet?.(quiet.cgroupId, quiet.group);
  }
}
