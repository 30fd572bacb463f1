/**
 * Accesses to an image layer's file whose container cannot be named yet: the pod is known, but
 * neither its status nor the runtime names the container (a one-shot container exits, and its
 * bundle goes, before the kubelet reports it). They wait here and are routed again until the
 * pod's status names the container, or the window ends and they count as `unattributed`. Bounded:
 * past `capacity`, the oldest gives up first.
 */
import type { KernelEvent } from "../kernel/contract.ts";

export interface AttributionRetryOptions {
  /** Routes the event again; true when it was routed (attributed, or dropped for another reason). */
  retry: (event: KernelEvent) => boolean;
  /** The event is given up: count it. */
  giveUp: (event: KernelEvent) => void;
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
  const waiting: { event: KernelEvent; until: number }[] = [];
  let timer: NodeJS.Timeout | undefined;

  const sweep = (): void => {
    const now = Date.now();
    const still = waiting.splice(0).filter(({ event, until }) => {
      try {
        if (options.retry(event)) return false;
      } catch (error) {
        // Routed outside the ring consumer's handling: a failure is this event's, never the timer's.
        options.onError?.(error, event);
        options.giveUp(event);
        return false;
      }
      if (now < until) return true;
      options.giveUp(event);
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
      if (waiting.length >= capacity) options.giveUp((waiting.shift() as { event: KernelEvent }).event);
      waiting.push({ event, until: Date.now() + windowMs });
      timer ??= setInterval(sweep, options.intervalMs ?? 500).unref();
    },
    size: () => waiting.length,
    stop() {
      if (timer) clearInterval(timer);
      timer = undefined;
      for (const { event } of waiting.splice(0)) options.giveUp(event);
    },
  };
}
