/**
 * How a watcher's events reach its listeners: the ring's consumer (ring-consumer.ts), once
 * started, delivers what the kernel emitted, each event annotated with its flood
 * summary (flood-summaries.ts), which also delivers summaries of its own on a timer.
 */
import { setTimeout as delay } from "node:timers/promises";
import type { Logger } from "../log.ts";
import type { FileKey, KernelEvent } from "./contract.ts";
import { readCounters } from "./counters.ts";
import type { RecordBatch } from "./event-record.ts";
import { FloodSummaries } from "./flood-summaries.ts";
import type { PinnedMap } from "./object-load.ts";
import { RingConsumer } from "./ring-consumer.ts";
import type { KernelWatcherOptions } from "./watcher-options.ts";

/** The burst, sweep and flood timing, with its defaults, resolved once from the options. */
export interface DeliveryTiming {
  burstGapNs: bigint;
  burstMaxNs: bigint;
  sweepIntervalMs: number;
  floodWindowNs: bigint;
}

export function deliveryTiming(options: KernelWatcherOptions): DeliveryTiming {
  return {
    burstGapNs: nanoseconds(options.burstGapMs ?? 5),
    burstMaxNs: nanoseconds(options.burstMaxMs ?? 250),
    sweepIntervalMs: options.sweepIntervalMs ?? 10,
    floodWindowNs: nanoseconds(options.floodWindowMs ?? 1000),
  };
}

function nanoseconds(ms: number): bigint {
  return BigInt(Math.round(ms * 1e6));
}

export interface EventDeliveryContext {
  fds: Record<PinnedMap, number>;
  timing: DeliveryTiming;
  /** When the counters were read at load (ring-drain.ts RingDrainData.adoptedBeforeNs). */
  adoptedBeforeNs: bigint;
  /** The watched file of a slot, for naming a flood summary's file. */
  keyOfSlot: (slot: number) => FileKey | undefined;
  /** The watcher's listeners, read at each delivery (listeners added later are called too). */
  listeners: ReadonlyArray<(event: KernelEvent) => void>;
  options: Pick<KernelWatcherOptions, "maxBatch" | "coalesceMs">;
  logger: Logger | undefined;
}

/** Starts the flood sweeps and makes the ring's consumer (started by the watcher); both deliver to `listeners`. */
export function startEventDelivery(ctx: EventDeliveryContext): {
  flood: FloodSummaries;
  consumer: RingConsumer;
} {
  const { fds, options, timing } = ctx;
  const deliver = (event: KernelEvent) => {
    for (const listener of ctx.listeners) listener(event);
  };
  const flood = new FloodSummaries(fds.hive_flood, timing.floodWindowNs, ctx.keyOfSlot);
  let keptBatch: RecordBatch | undefined;
  flood.startSweeps(deliver, ctx.logger);
  const consumer = new RingConsumer({
    data: {
      eventsFd: fds.hive_events,
      burstsFd: fds.hive_bursts,
      sweptFd: fds.hive_swept,
      countersFd: fds.hive_counters,
      burstGapNs: timing.burstGapNs,
      burstMaxNs: timing.burstMaxNs,
      sweepIntervalMs: timing.sweepIntervalMs,
      adoptedBeforeNs: ctx.adoptedBeforeNs,
    },
    ...(options.maxBatch !== undefined ? { maxBatch: options.maxBatch } : {}),
    ...(options.coalesceMs !== undefined ? { coalesceMs: options.coalesceMs } : {}),
    onEvent: (event, batch, at) => {
      if (batch !== keptBatch) {
        keptBatch = batch;
        flood.keep(batch); // where a flood summary finds its key's last event
      }
      flood.annotate(event, batch, at);
      deliver(event);
    },
    logger: ctx.logger,
  });
  return { flood, consumer };
}

/** Bursts this agent opened and delivered (an adopted backlog excluded). */
export function deliveredBy(consumer: RingConsumer | null): bigint {
  return (consumer?.delivered ?? 0n) - (consumer?.backlog ?? 0n);
}

/** What waitDelivered compares: the kernel's counters against what the consumer delivered. */
export interface DeliveryProgress {
  countersFd: number;
  ncpus: number;
  timing: DeliveryTiming;
  /** Bursts opened before this agent adopted the maps, less those lost or held then. */
  base: bigint;
  consumer: RingConsumer | null;
}

/**
 * Waits until every burst the kernel opened since adoption is delivered or counted lost (idle
 * bursts are swept after 2× the gap), and the ring holds nothing unread (an earlier agent's
 * backlog included), or `timeoutMs` passes. True when delivered.
 */
export async function waitDelivered(p: DeliveryProgress, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  await delay((Number(p.timing.burstGapNs) / 1e6) * 2 + p.timing.sweepIntervalMs * 2);
  do {
    const { bursts, lost, held } = readCounters(p.countersFd, p.ncpus);
    const opened = bursts - p.base;
    if (deliveredBy(p.consumer) + lost + held >= opened && (p.consumer?.drained() ?? true)) return true;
    await delay(5);
  } while (Date.now() < deadline);
  return false;
}
