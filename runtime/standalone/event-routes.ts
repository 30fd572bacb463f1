/**
 * Where a kernel event goes in standalone mode, from its slot: alerts of the traps on its file,
 * the containers of an image layer's file (layer-alerts.ts), or a re-plan when a trapped file or
 * its directory changed. Slots a re-plan removed keep routing a while (retired slots), since an
 * event raised before the re-plan may reach user space after it. Pure: the caller delivers.
 */
import type { AlertSource } from "../alerts/alert-source.ts";
import type { KernelEvent } from "../kernel/contract.ts";
import type { TrapRef } from "./watch-plan.ts";
import { type SlotInfo, sourcesFor, type WatchTable } from "./watch-table.ts";

/** How long a slot a re-plan removed still routes the events raised before (ms). */
export const RETIRED_SLOT_MS = 30_000;

/**
 * Slots a re-plan removed, kept a while for the events raised before it: a file's deletion or
 * replacement reaches user space after its directory's change, which may have re-planned
 * already. Slots stay with their file (counterSlots), so a retired slot names only that file.
 */
export type RetiredSlots = ReadonlyMap<number, { info: SlotInfo; until: number }>;

/** The retired slots after a re-plan from `before` to `after` at `atMs`. */
export function retireSlots(
  retired: RetiredSlots,
  before: WatchTable,
  after: WatchTable,
  atMs: number,
): RetiredSlots {
  const next = new Map<number, { info: SlotInfo; until: number }>();
  for (const [slot, held] of retired) if (held.until > atMs && !after.slots.has(slot)) next.set(slot, held);
  for (const [slot, info] of before.slots)
    if (!after.slots.has(slot)) next.set(slot, { info, until: atMs + RETIRED_SLOT_MS });
  return next;
}

export type EventRoute =
  /** Raised before a re-plan removed the slot: the file is no longer watched. */
  | { to: "nowhere" }
  /** An image layer's file: told to the container the access came from. */
  | { to: "layer"; refs: readonly TrapRef[] }
  /** A trapped file's directory changed: the file may have been re-created, so its inode may be new. */
  | { to: "replan"; reason: string }
  /** The traps on the file that want the event; `follow` when its name now names another file or none. */
  | { to: "alerts"; sources: AlertSource[]; follow?: string };

export function routeEvent(event: KernelEvent, table: WatchTable, retired: RetiredSlots): EventRoute {
  const info = table.slots.get(event.slot) ?? retired.get(event.slot)?.info;
  if (info === undefined) return { to: "nowhere" };
  if (info.kind === "layer") return { to: "layer", refs: info.refs };
  if (event.kind === "parent" || info.kind === "parent") return { to: "replan", reason: "directory changed" };
  const sources = sourcesFor(info, event).map((file) => file.source);
  // A truncation keeps the inode: nothing to follow.
  if (event.change !== undefined && event.change !== "truncated")
    return { to: "alerts", sources, follow: `file ${event.change}` };
  return { to: "alerts", sources };
}
