/**
 * The kernel side's metrics: what the trap program emitted, lost, held and skipped, the watch
 * map, the running program and its ring buffer, all read at scrape time from the kernel
 * watcher (absent on nodes that never load the program), and the events the agent dropped.
 */
import { Counter, Gauge, type Registry } from "prom-client";
import type { HiveMetrics } from "./metrics.ts";
import { type KernelCountersSource, type ScrapeSources, sinceLastScrape } from "./scrape-sources.ts";

type KernelCounters = ReturnType<KernelCountersSource>;

interface KernelFigure<T> {
  name: string;
  help: string;
  pick: (c: KernelCounters) => T;
}

/** Counters fed from the kernel's cumulative counters, in their exposition order. */
const KERNEL_COUNTERS: readonly KernelFigure<bigint>[] = [
  {
    name: "hive_kernel_events_total",
    help: "Access events the kernel program emitted into the ring buffer.",
    pick: (c) => c.events,
  },
  {
    name: "hive_kernel_program_misses_total",
    help: "Runs of Hive's kernel hooks the kernel skipped because one was already running on that CPU (fentry recursion; kprobes since Linux 6.7): permission checks never seen.",
    pick: (c) => c.programMisses ?? 0n,
  },
  {
    name: "hive_kernel_upgrade_discarded_total",
    help: "Events and pending bursts an agent of another map layout left unread when this one replaced its pins (another version's layout cannot be decoded): lost, and counted.",
    pick: (c) => c.upgradeDiscarded ?? 0n,
  },
  {
    name: "hive_kernel_events_lost_total",
    help: "Access events lost because the kernel ring buffer was full.",
    pick: (c) => c.lost,
  },
  {
    name: "hive_kernel_bursts_held_total",
    help: "Bursts a flood key (one executable, one trapped file, one cgroup) made beyond its budget: held in the kernel and reported as counts (an alert's `summarized`) instead of one event each.",
    pick: (c) => c.held ?? 0n,
  },
  {
    name: "hive_kernel_flood_table_full_total",
    help: "Bursts emitted without a flood budget because the kernel's flood table (16,384 keys) was full.",
    pick: (c) => c.floodFull ?? 0n,
  },
  {
    name: "hive_kernel_checks_quiet_total",
    help: "Checks of an image layer's file by a container no trap selects, skipped in the kernel (its cgroup is in the quiet map): no burst, no event. The first access of such a container is an event, dropped as unselected.",
    pick: (c) => c.quiet ?? 0n,
  },
  {
    name: "hive_kernel_checks_allowed_total",
    help: "Checks of a trapped file an allow entry let through in the kernel: counted, no burst, no event (hive_allowed_accesses_total says which trap and entry).",
    pick: (c) => c.allowed ?? 0n,
  },
  {
    name: "hive_kernel_bursts_unfolded_total",
    help: "Accesses reported at once, without folding their later checks, because the kernel's burst table was full.",
    pick: (c) => c.unfolded ?? 0n,
  },
];

const WATCHED_FILES: KernelFigure<number> = {
  name: "hive_watched_files",
  help: "Entries in the kernel watch map (trapped files and their parent directories).",
  pick: (c) => c.watched,
};

/** Gauges of the ring buffer and the watch map, after the program's info, in their exposition order. */
const KERNEL_GAUGES: readonly KernelFigure<number>[] = [
  {
    name: "hive_kernel_ring_used_bytes",
    help: "Bytes of the kernel ring buffer not given back to the kernel: events not read yet, or read and held until their alerts are durable.",
    pick: (c) => c.ringUsedBytes ?? 0,
  },
  {
    name: "hive_kernel_ring_held",
    help: "1 while handled events keep their ring space because their alerts are neither on the spool's disk nor delivered (the spool's disk refuses writes).",
    pick: (c) => (c.ringHeld ? 1 : 0),
  },
  {
    name: "hive_kernel_ring_paused",
    help: "1 while the ring buffer is not read because alerts can neither be written nor delivered and their memory is half full: events wait in the ring, and the kernel counts what it cannot take as lost.",
    pick: (c) => (c.ringPaused ? 1 : 0),
  },
  {
    name: "hive_unwatched_files",
    help: "Files (and parent directories) to watch that the full kernel watch map has no room for.",
    pick: (c) => c.notWatched ?? 0,
  },
];

/** Registers the metrics read from the kernel watcher; returns the one HiveMetrics names. */
export function defineKernelMetrics(
  registers: Registry[],
  sources: ScrapeSources,
): Pick<HiveMetrics, "watchedFiles"> {
  for (const figure of KERNEL_COUNTERS) kernelCounter(registers, sources, figure);
  const watchedFiles = kernelGauge(registers, sources, WATCHED_FILES);
  programInfoGauge(registers, sources);
  for (const figure of KERNEL_GAUGES) kernelGauge(registers, sources, figure);
  return { watchedFiles };
}

/** A counter fed at scrape time from one of the kernel's cumulative counters. */
function kernelCounter(registers: Registry[], sources: ScrapeSources, figure: KernelFigure<bigint>): void {
  let seen = 0n;
  new Counter({
    name: figure.name,
    help: figure.help,
    registers,
    collect() {
      if (!sources.kernel) return;
      const now = figure.pick(sources.kernel());
      this.inc(Number(sinceLastScrape(now, seen)));
      seen = now;
    },
  });
}

/** A gauge fed at scrape time from the kernel watcher's state. */
function kernelGauge(registers: Registry[], sources: ScrapeSources, figure: KernelFigure<number>): Gauge {
  return new Gauge({
    name: figure.name,
    help: figure.help,
    registers,
    collect() {
      if (sources.kernel) this.set(figure.pick(sources.kernel()));
    },
  });
}

function programInfoGauge(registers: Registry[], sources: ScrapeSources): void {
  new Gauge({
    name: "hive_kernel_program_info",
    help: "1 for the trap program the kernel runs: its tag (a hash of its instructions: another build has another), attach mode, and the tag it replaced when this agent found an earlier version running.",
    labelNames: ["tag", "attach_mode", "replaced"],
    registers,
    collect() {
      // One series only: the program's labels change when another program replaces it.
      this.reset();
      const program = sources.kernel?.().program;
      if (program)
        this.set(
          { tag: program.tag, attach_mode: program.attachMode, replaced: program.replacedFrom ?? "" },
          1,
        );
    },
  });
}

/** Events the agent dropped before alerting (its reasons: metrics.ts EVENT_DROP_REASONS). */
export function kernelEventsDroppedCounter(registers: Registry[]): HiveMetrics["kernelEventsDropped"] {
  return new Counter({
    name: "hive_kernel_events_dropped_total",
    help: "Kernel events dropped by the agent before alerting: unmatched (the file, or the live trap it was watched for, is no longer watched), hold_full (more events before the first sync after a restart than the hold keeps), pipeline_error (the alert pipeline failed on the event; it is logged), unselected (an image layer's trapped file accessed by a container no trap selects: expected) or unattributed (by a container this node could not name: an access lost).",
    labelNames: ["reason"],
    registers,
  });
}
