/**
 * Accesses to an image layer's file whose container cannot be named yet: the pod is known, but
 * neither its status nor the runtime names the container (a one-shot container exits, and its
 * bundle goes, before the kubelet reports it). They wait here and are routed again until the
 * pod's status names the container, or the window ends and they count as `unattributed`. Bounded:
 * past `capacity`, the oldest gives up first. While one waits, its ring space stays unacknowledged
 * (`hold`): an agent killed or restarted meanwhile leaves it to the next one, which routes it again.
 */
import type { KernelEvent } from "../kernel/contract.ts";
import { retainedEvent } from "../kernel/event-decode.ts";

export interface AttributionRetryOptions {
  /** Routes the event again; true when it was routed (attributed, or dropped for another reason). */
  retry: (event: KernelEvent) => boolean;
  /** The event is given up: count it. */
  giveUp: (event: KernelEvent) => void;
  /** Defers consuming the event in the kernel until the returned release (KernelWatcher.holdAcks). */
  hold?: () => () => void;
  /** Routing it again threw (it is then given up). */
  onError?: (error: unknown, event: KernelEvent) => void;
  /** How long an event may wait (default 20 s, within the loader's retired-key window of 30 s). */
  windowMs?: number;
  intervalMs?: number;
  capacity?: number;
}

export interface AttributionRetry {
  park(event: KernelEvent): void;
  /** Events waiting now. */
  size(): number;
  stop(): void;
}

export function createAttributionRetry(options: AttributionRetryOptions): AttributionRetry {
  const windowMs = options.windowMs ?? 20_000;
  const capacity = options.capacity ?? 1024;
  const waiting: { event: KernelEvent; until: number; release: () => void }[] = [];
  const giveUp = (w: { event: KernelEvent; release: () => void }): void => {
    options.giveUp(w.event);
    w.release();
  };
  let timer: NodeJS.Timeout | undefined;

  const sweep = (): void => {
    const now = Date.now();
    const still = waiting.splice(0).filter((w) => {
      try {
        if (options.retry(w.event)) {
          w.release();
          return false;
        }
      } catch (error) {
        // Routed outside the ring consumer's handling: a failure is this event's, never the timer's.
        options.onError?.(error, w.event);
        giveUp(w);
        return false;
      }
      if (now < w.until) return true;
      giveUp(w);
      return false;
    });
    waiting.push(...still);
    if (waiting.length === 0 && timer) {
      clearInterval(timer);
      timer = undefined;
    }
  };

  return {
    park(event) {
      if (waiting.length >= capacity) giveUp(waiting.shift() as (typeof waiting)[number]);
      const release = options.hold?.() ?? (() => undefined);
      // Kept past its delivery: its own bytes, not the batch it was read from.
      waiting.push({ event: retainedEvent(event), until: Date.now() + windowMs, release });
      timer ??= setInterval(sweep, options.intervalMs ?? 500).unref();
    },
    size: () => waiting.length,
    /**
     * Stops retrying. With `hold`, what still waits stays in the kernel's ring for the next agent
     * (neither given up nor released); without it, it is given up.
     */
    stop() {
      if (timer) clearInterval(timer);
      timer = undefined;
      const left = waiting.splice(0);
      if (!options.hold) for (const w of left) giveUp(w);
    },
  };
}
