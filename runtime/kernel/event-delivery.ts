/**
 * How a watcher's events reach its listeners: the ring's consumer (ring-consumer.ts), once
 * started, delivers what the kernel emitted, each event annotated with its flood
 * summary (flood-summaries.ts), which also delivers summaries of its own on a timer.
 */
import type { Logger } from "../log.ts";
import type { FileKey, KernelEvent } from "./contract.ts";
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
