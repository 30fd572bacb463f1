/**
 * What standalone mode says in the log after a (re-)plan: what changed since the last plan,
 * not the whole table again. Each trap armed, each container no longer watched, and each trap
 * not watched (and why) is said once, until it changes. Pure: the lines are written by the caller.
 */
import type { Fields } from "../log.ts";
import { containerKey, containerLabel, type WatchPlan, type WatchTarget } from "./watch-plan.ts";

/** What the log said of the last plan, so that the next says only what changed. */
export interface PlanLogMemory {
  /** Trap × target × file armed, by id, with its target. */
  readonly watching: ReadonlyMap<string, WatchTarget>;
  /** Trap × target × cause not watched. */
  readonly missing: ReadonlySet<string>;
  /** Trap × cause not armed in the image layers. */
  readonly layerMisses: ReadonlySet<string>;
  /** Trap ids that matched no container. */
  readonly unmatched: ReadonlySet<string>;
}

export const nothingSaid = (): PlanLogMemory => ({
  watching: new Map(),
  missing: new Set(),
  layerMisses: new Set(),
  unmatched: new Set(),
});

export interface LogLine {
  level: "info" | "warn";
  msg: string;
  fields: Fields;
}

export interface PlanLogContext {
  /** Why this plan was made ("start", "SIGHUP", "directory changed"…). */
  reason: string;
  /** When containerd started the task of a container not armed before (`namespace/id` → ms). */
  taskStarts: ReadonlyMap<string, number>;
  /** When this plan's entries were written to the kernel map (ms since the epoch). */
  armedAtMs: number;
  /** Whether a container runtime is listed, and whether its starts and stops are followed. */
  runtime: { listed: boolean; followed: boolean };
}

export function describeTarget(target: WatchTarget): string {
  return target.kind === "host" ? "host" : `container ${containerLabel(target.container)}`;
}

/** The lines to log for `plan`, given what was said of the last one, and what is said after them. */
export function reportPlan(
  said: PlanLogMemory,
  plan: WatchPlan,
  context: PlanLogContext,
): { lines: LogLine[]; said: PlanLogMemory } {
  const watching = watchingLines(said, plan, context);
  const missing = missingLines(said, plan);
  const layerMisses = layerMissLines(said, plan);
  const unmatched = unmatchedLines(said, plan, context);
  return {
    lines: [...watching.lines, ...missing.lines, ...layerMisses.lines, ...unmatched.lines],
    said: {
      watching: watching.said,
      missing: missing.said,
      layerMisses: layerMisses.said,
      unmatched: unmatched.said,
    },
  };
}

/** Each file armed that was not, and each container whose traps are all gone. */
function watchingLines(
  said: PlanLogMemory,
  plan: WatchPlan,
  context: PlanLogContext,
): { lines: LogLine[]; said: Map<string, WatchTarget> } {
  const { reason } = context;
  const lines: LogLine[] = [];
  const now = new Map<string, WatchTarget>();
  for (const file of plan.files) {
    const { key } = file.resolved;
    const id = `${file.ref.trapId}|${describeTarget(file.target)}|${key.major}:${key.minor}:${key.ino}`;
    now.set(id, file.target);
    if (said.watching.has(id)) continue;
    const started = file.target.kind === "container" ? containerKey(file.target.container) : "";
    const startMs = context.taskStarts.get(started);
    lines.push({
      level: "info",
      msg: "watching",
      fields: {
        policy: file.ref.policy.metadata.name,
        path: file.ref.trap.path,
        target: describeTarget(file.target),
        resolvedPath: file.resolved.resolvedPath,
        device: `${key.major}:${key.minor}`,
        inode: key.ino.toString(),
        created: file.resolved.created,
        reason,
        // From containerd's task start event to this trap armed in the kernel map.
        ...(startMs === undefined ? {} : { sinceTaskStartMs: Math.round(context.armedAtMs - startMs) }),
      },
    });
  }
  for (const [id, target] of said.watching) {
    if (now.has(id) || target.kind === "host") continue;
    lines.push({
      level: "info",
      msg: "not watching any more",
      fields: { target: describeTarget(target), reason },
    });
  }
  return { lines, said: now };
}

/** Each trap × target not watched, once per cause. */
function missingLines(said: PlanLogMemory, plan: WatchPlan): { lines: LogLine[]; said: Set<string> } {
  const lines: LogLine[] = [];
  const missing = new Set<string>();
  for (const miss of plan.unresolved) {
    const id = `${miss.ref.trapId}|${describeTarget(miss.target)}|${miss.error.code}`;
    missing.add(id);
    if (said.missing.has(id)) continue;
    lines.push({
      level: "warn",
      msg: "trap not watched",
      fields: {
        policy: miss.ref.policy.metadata.name,
        origin: miss.ref.origin,
        path: miss.ref.trap.path,
        target: describeTarget(miss.target),
        error: miss.error.describe(),
        ...(miss.parent
          ? { waitingIn: "its directory is watched: the trap is armed when the file appears" }
          : {}),
      },
    });
  }
  return { lines, said: missing };
}

/** Each trap not armed in the image layers, once per cause. */
function layerMissLines(said: PlanLogMemory, plan: WatchPlan): { lines: LogLine[]; said: Set<string> } {
  const lines: LogLine[] = [];
  const layerMisses = new Set<string>();
  for (const miss of plan.layerMisses ?? []) {
    const id = `${miss.ref.trapId}|${miss.error.code}`;
    layerMisses.add(id);
    if (said.layerMisses.has(id)) continue;
    lines.push({
      level: "warn",
      msg: "trap not armed in the image layers: containers are watched once they run",
      fields: {
        policy: miss.ref.policy.metadata.name,
        path: miss.ref.trap.path,
        error: miss.error.describe(),
      },
    });
  }
  return { lines, said: layerMisses };
}

/** Each trap that matches no container, with what arms it. */
function unmatchedLines(
  said: PlanLogMemory,
  plan: WatchPlan,
  context: PlanLogContext,
): { lines: LogLine[]; said: Set<string> } {
  const lines: LogLine[] = [];
  for (const ref of plan.unmatched) {
    if (said.unmatched.has(ref.trapId)) continue;
    const { listed, followed } = context.runtime;
    lines.push({
      level: "warn",
      msg: "trap matches no container",
      fields: {
        policy: ref.policy.metadata.name,
        origin: ref.origin,
        path: ref.trap.path,
        hint: !listed
          ? "no container runtime is reachable; traps with `match` apply to containers only"
          : plan.layers?.some((l) => l.refs.includes(ref))
            ? "it is armed in the image layers: a container that starts is watched from its first instruction"
            : followed
              ? "it is armed as soon as a matching container starts"
              : "start a matching container, then send SIGHUP to re-scan",
      },
    });
  }
  return { lines, said: new Set(plan.unmatched.map((ref) => ref.trapId)) };
}
