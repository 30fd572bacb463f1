/**
 * The agent's cost per event against its aim and against the last accepted figures: the kernel
 * bench fails (its run, never the tests) when a change makes one grow by more than a tenth. The
 * ring → decoded rate is told beside them.
 * The accepted figures are bench/kernel/baseline.json, per kernel series; after a change that
 * is meant to cost more, measure and write them there with the reason.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";

/** Issue 34's aim for the agent's CPU per event, in guest instructions. */
export const PER_EVENT_AIM = 15_000;
/** How much a figure may grow over the accepted one before the bench run fails. */
export const GROWTH_ALLOWED = 1.1;

export interface PerEventFigures {
  /** Agent CPU per event it allows in user space: ring drain, decode, allow match, counting. */
  agentPerEvent: number;
  /** The event read in place (eventAt) + the pipeline's handle, per event, in a warm loop. */
  decodeAndHandle: number;
  /** Ring buffer → decoded events per guest-second. */
  eventsPerSecond: number;
}

type Baseline = Record<string, PerEventFigures & { measuredAt: string }>;

function readBaseline(): Baseline {
  return JSON.parse(readFileSync(join(import.meta.dirname, "baseline.json"), "utf8")) as Baseline;
}

/** Prints the figures against the aim and the baseline; returns the figures that grew too much. */
export function checkPerEvent(series: string, now: PerEventFigures): string[] {
  const fmt = (n: number) => Math.round(n).toLocaleString("en");
  const base = readBaseline()[series];
  console.log(
    `\nAgent CPU per event (guest instructions), against the aim and the accepted figures (bench/kernel/baseline.json):`,
  );
  const against = (n: number) => `aim ≤ ${fmt(PER_EVENT_AIM)}: ${n <= PER_EVENT_AIM ? "within" : "ABOVE"}`;
  console.log(
    `  the event's own work (decode, flood annotation, pipeline: main thread, warm) ${fmt(now.decodeAndHandle)} (${against(now.decodeAndHandle)});` +
      ` the agent's whole CPU per event allowed in user space, libuv's pool and V8's helpers too, ${fmt(now.agentPerEvent)} (${against(now.agentPerEvent)});` +
      ` ring → decoded ${fmt(now.eventsPerSecond)} events per guest-second`,
  );
  if (!base) {
    console.log(`  no accepted figures for Linux ${series}: nothing to compare with`);
    return [];
  }
  const grown: string[] = [];
  // Costs in guest instructions may not grow: icount makes them the same from run to run.
  const ratios: Array<[string, number]> = [
    ["agent CPU per event", now.agentPerEvent / base.agentPerEvent],
    ["decode + pipeline", now.decodeAndHandle / base.decodeAndHandle],
  ];
  for (const [what, ratio] of ratios) {
    const verdict = ratio > GROWTH_ALLOWED ? "GREW" : "ok";
    console.log(`  ${what.padEnd(44)} ${ratio.toFixed(3)} of the accepted (${base.measuredAt}): ${verdict}`);
    if (ratio > GROWTH_ALLOWED) grown.push(what);
  }
  // The rate is told, not checked: its guest time includes idle waits that follow the host's
  // clock, and runs of the same code differ by a fifth, more than the growth allowed.
  const rate = base.eventsPerSecond / now.eventsPerSecond;
  console.log(
    `  ${"ring → decoded events per second (inverse)".padEnd(44)} ${rate.toFixed(3)} of the accepted: told, not checked`,
  );
  return grown;
}
