/**
 * One (re-)plan of standalone mode, over the containers just listed: every trap resolved
 * (watch-plan.ts), the kernel map made equal to the plan (watch-table.ts), the slots it removed
 * retired (event-routes.ts), and what changed said in the log (plan-log.ts). When a re-plan runs
 * is replan-queue.ts's; what it leaves behind is the PlanState the next one starts from.
 */
import { HiveError } from "../../api/errors.ts";
import { takeAllowed } from "../alerts/allow-rules.ts";
import { proveWith } from "../kernel/trap-proof.ts";
import { type RetiredSlots, retireSlots } from "./event-routes.ts";
import { nothingSaid, type PlanLogMemory, reportPlan } from "./plan-log.ts";
import type { StandaloneOptions } from "./standalone.ts";
import {
  containerKey,
  type LocalContainer,
  type PlanContext,
  planWatches,
  type TrapRef,
  type WatchPlan,
} from "./watch-plan.ts";
import { buildWatchTable, type WatchTable } from "./watch-table.ts";

/** What one plan leaves for the next, and for the events routed meanwhile. */
export interface PlanState {
  plan: WatchPlan;
  table: WatchTable;
  /** What the plan was made with: alert sources of image-layer accesses are made with it too. */
  context: PlanContext;
  /** Which containers the plan was made from (fingerprint): a re-list that finds the same changes nothing. */
  listed: string;
  retired: RetiredSlots;
  /** What the log said of the plan, so that a re-plan says only what changed. */
  said: PlanLogMemory;
  /** Task start times of containers not yet armed (from their start events), by `namespace/id`. */
  taskStarts: Map<string, number>;
}

/** What every plan is made from, and slot numbers that stay with their file across re-plans. */
export interface Planner {
  refs: readonly TrapRef[];
  slotFor: (id: string) => number;
}

/** The options a plan reads: the run's identity, proof and layers, and whether containers are listed and followed. */
export type PlanOptions = Pick<
  StandaloneOptions,
  | "watcher"
  | "alerts"
  | "logger"
  | "kernelId"
  | "nodeName"
  | "defaultCallback"
  | "imageLayers"
  | "listContainers"
  | "containerEvents"
>;

/** How long a task start waits for a plan that lists its container (ms). */
const TASK_START_KEPT_MS = 60_000;

/** What a plan depends on in a container list: which containers run, with which init PID. */
export function fingerprint(containers: readonly LocalContainer[]): string {
  return containers
    .map((c) => `${containerKey(c)}:${c.pid}`)
    .sort()
    .join(",");
}

/** What a plan is resolved with: the listed containers, and the proof and layers this run has. */
function planContext(options: PlanOptions, containers: readonly LocalContainer[]): PlanContext {
  const { watcher } = options;
  return {
    kernelId: options.kernelId,
    containers,
    // Each trap armed on the identity the kernel checks, proven once per plan (trap-proof.ts).
    ...(watcher.proofMaps ? { prove: proveWith(watcher.proofMaps()) } : {}),
    ...(options.nodeName === undefined ? {} : { nodeName: options.nodeName }),
    ...(options.defaultCallback === undefined ? {} : { defaultCallback: options.defaultCallback }),
    ...(options.imageLayers ? { layers: options.imageLayers.layers } : {}),
  };
}

/** What a plan starts from: nothing planned, nothing armed, nothing said. */
export function initialPlanState(kernelId: string): PlanState {
  return {
    plan: { files: [], unresolved: [], unmatched: [] },
    table: { entries: [], slots: new Map(), allow: [] },
    context: { kernelId },
    listed: "",
    retired: new Map(),
    said: nothingSaid(),
    taskStarts: new Map(),
  };
}

/** One (re-)plan over `containers`: traps resolved, the kernel map synced, what changed logged. */
export function applyPlan(
  options: PlanOptions,
  state: PlanState,
  planner: Planner,
  reason: string,
  containers: readonly LocalContainer[],
): void {
  state.listed = fingerprint(containers);
  state.context = planContext(options, containers);
  state.plan = planWatches(planner.refs, state.context);
  const before = state.table;
  state.table = buildWatchTable(state.plan, planner.slotFor);
  state.retired = retireSlots(state.retired, before, state.table, Date.now());
  // Counted under the traps the kernel's rules were written for: before the sync, and the last
  // counts of the keys it removed after.
  harvestAllowed(options, before);
  options.watcher.sync(state.table.entries, state.table.allow);
  harvestAllowed(options, before);
  const armedAtMs = Date.now();
  const report = reportPlan(state.said, state.plan, {
    reason,
    taskStarts: state.taskStarts,
    armedAtMs,
    runtime: {
      listed: options.listContainers !== undefined,
      followed: options.containerEvents !== undefined,
    },
  });
  for (const line of report.lines) options.logger[line.level](line.msg, line.fields);
  state.said = report.said;
  // A start is measured once, by the first plan that lists its container; starts that came
  // while this plan ran wait for the next. Bounded: a start no list ever shows is dropped.
  for (const c of containers) state.taskStarts.delete(containerKey(c));
  for (const [key, atMs] of state.taskStarts)
    if (armedAtMs - atMs > TASK_START_KEPT_MS) state.taskStarts.delete(key);
}

/** Hands what the kernel's allow rules let through since the last harvest to the trap of each slot of `table`. */
export function harvestAllowed(options: Pick<PlanOptions, "watcher" | "alerts">, table: WatchTable): void {
  const { watcher, alerts } = options;
  const add = alerts.addAllowed?.bind(alerts);
  // Rules are written only for a slot of one trap (watch-table.ts); a slot of an earlier run has none here.
  if (add) takeAllowed(watcher, (slot) => table.slots.get(slot)?.files[0]?.source, add);
}

/** The first plan must watch something, or wait for something to arm (a container start, a layer's file). */
export function assertSomethingToWatch(
  options: Pick<StandaloneOptions, "containerEvents" | "documents">,
  plan: WatchPlan,
): void {
  // With containers followed, a trap that matches none yet waits for one to start; one armed in the
  // image layers already watches the containers to come.
  const waiting =
    (options.containerEvents !== undefined && plan.unmatched.length > 0) || (plan.layers?.length ?? 0) > 0;
  if (plan.files.length > 0 || waiting) return;
  const first = plan.unresolved[0]?.error;
  throw new HiveError(
    first?.code ?? "ContainerNotFound",
    "no trapped file could be resolved: nothing to watch",
    {
      object: options.documents.map((d) => d.file).join(", "),
      hint: first
        ? `first problem: ${first.describe()}`
        : "every trap has a `match` and no running container matches it",
    },
  );
}
