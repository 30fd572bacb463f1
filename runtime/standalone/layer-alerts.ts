/**
 * Alerts for accesses to an image layer's file in standalone mode (layer-plan.ts): the container
 * is found by the accessing task's cgroup (container-cgroups.ts), never by the overlay the file was
 * reached through, and each trap on the file that selects that container alerts as the container's
 * own file would. An access no trap selects is dropped, counted, and quieted in the kernel.
 *
 * Finding a container made since the last list asks the runtime again: meanwhile the event keeps
 * its ring space (KernelWatcher.holdAcks), so a process killed before the alert loses nothing.
 */
import type { AlertSource } from "../alerts/alert-source.ts";
import { trapWantsEvent } from "../controllers/live-traps.ts";
import type { KernelEvent, KernelWatcher } from "../kernel/contract.ts";
import { retainedEvent } from "../kernel/event-decode.ts";
import type { Logger } from "../log.ts";
import type { ContainerAttribution } from "./container-cgroups.ts";
import { containerMatches, type TrapRef, type WatchTarget } from "./watch-plan.ts";

export type LayerDrop = "unattributed" | "unselected";

export interface LayerAlertsOptions {
  attribution: ContainerAttribution;
  watcher: Pick<KernelWatcher, "holdAcks" | "quiet">;
  /** The alert source of `ref` on `target` (watch-plan.ts alertSource, with the current plan's context). */
  sourceOf: (ref: TrapRef, target: WatchTarget) => AlertSource;
  alert: (event: KernelEvent, source: AlertSource) => void;
  /** An access dropped before alerting (hive_kernel_events_dropped_total). */
  onDropped?: (reason: LayerDrop) => void;
  logger: Logger;
}

export interface LayerAlerts {
  /** Routes an event raised on a layer file's slot, whose traps are `refs`. */
  handle(event: KernelEvent, refs: readonly TrapRef[]): void;
  /** Settles when every event handed over so far is routed (for close and tests). */
  idle(): Promise<void>;
}

export function createLayerAlerts(options: LayerAlertsOptions): LayerAlerts {
  const { attribution, watcher, logger } = options;
  const pending = new Set<Promise<void>>();
  const route = async (event: KernelEvent, refs: readonly TrapRef[]) => {
    const generation = attribution.generation;
    const container = await attribution.containerOf(event.cgroupId, event.ktimeNs);
    if (container === undefined) {
      options.onDropped?.("unattributed");
      return;
    }
    const selecting = container === null ? [] : refs.filter((ref) => containerMatches(ref.trap, container));
    if (container === null || selecting.length === 0) {
      options.onDropped?.("unselected");
      // Its next accesses cost the kernel one more lookup, not an event, until selection may change;
      // not when the containers changed while this one was looked up (it may be selected now).
      if (attribution.generation === generation) watcher.quiet?.(event.cgroupId, event.slot);
      return;
    }
    // The pid is the task's init process (allow lists resolve in its root); none: no allow file holds.
    const target: WatchTarget = { kind: "container", container: { ...container, pid: container.pid ?? 0 } };
    for (const ref of selecting)
      if (trapWantsEvent(ref.trap, event)) options.alert(event, options.sourceOf(ref, target));
  };
  return {
    handle(delivered, refs) {
      // Told to a container after an await: the event is kept beyond its delivery.
      const event = retainedEvent(delivered);
      const release = watcher.holdAcks?.();
      const done = route(event, refs)
        .catch((error: unknown) => {
          options.onDropped?.("unattributed");
          logger.error("an access to an image layer's file could not be told to a container", {
            slot: event.slot,
            cgroupId: event.cgroupId.toString(),
            error,
          });
        })
        .finally(() => {
          release?.();
          pending.delete(done);
        });
      pending.add(done);
    },
    async idle() {
      while (pending.size > 0) await Promise.all(pending);
    },
  };
}
