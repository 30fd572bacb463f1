/**
 * The kernel map's content for a watch plan (watch-plan.ts): which file each slot stands for,
 * the entry written for it, and which traps an event on a slot alerts. Slots stay with their
 * file across re-plans, so that an event raised before a re-plan still names its file.
 */
import { ACCESS_KINDS, type AccessKind, strongestDeny, trapDeny } from "../../api/index.ts";
import { allowFlagOf, allowRulesFor } from "../alerts/allow-rules.ts";
import { trapAccesses, trapChanges, trapWantsEvent } from "../controllers/live-traps.ts";
import type { AllowRule, FileKey, WatchEntry } from "../kernel/contract.ts";
import { fileKeyId } from "./layer-plan.ts";
import type { TrapRef, UnresolvedTrap, WatchedFile, WatchPlan } from "./watch-plan.ts";

/** What one slot of the kernel map stands for. */
export interface SlotInfo {
  /** `layer`: an image layer's file, which every container of the image reaches (layer-alerts.ts). */
  kind: "file" | "parent" | "layer";
  key: FileKey;
  /** The trap × target pairs on this file (several traps may watch one file), or whose parent this is. */
  files: WatchedFile[];
  /** For a parent: traps whose file is missing from it, re-resolved when an entry appears. */
  waiting: UnresolvedTrap[];
  /** For a layer file: the traps on its path, each alerting the containers it selects. */
  refs: TrapRef[];
}

export interface WatchTable {
  entries: WatchEntry[];
  slots: Map<number, SlotInfo>;
  /** The kernel's allow rules (allow-rules.ts): a file one trap watches, whose allow list it can decide. */
  allow: AllowRule[];
}

/** A slot's identity across re-plans: its kind and its file. */
const slotId = (kind: SlotInfo["kind"], key: FileKey) => `${kind}:${fileKeyId(key)}`;

/**
 * The kernel map's content for a plan: one `file` entry per distinct file (the union of its
 * traps' access kinds) and one `parent` entry per distinct directory holding a trapped file,
 * so that a rename over the file or its re-creation is reported and the trap re-resolved. An
 * image layer's file is an entry of its own group, and a container's file over it (the proof's
 * `lower`) joins that group: one access checks both, and the kernel folds them into one burst.
 */
export function buildWatchTable(
  plan: WatchPlan,
  slotFor: (id: string) => number = counterSlots(),
): WatchTable {
  const byId = slotsOf(plan);
  const layerSlot = (key: FileKey | undefined) =>
    key === undefined || !byId.has(slotId("layer", key)) ? undefined : slotFor(slotId("layer", key));
  const entries: WatchEntry[] = [];
  const slots = new Map<number, SlotInfo>();
  const allow: AllowRule[] = [];
  for (const [id, info] of byId) {
    const slot = slotFor(id);
    slots.set(slot, info);
    const rules = allowRulesOf(info, slot);
    const flag = allowFlagOf(rules);
    entries.push({ ...entryFor(info, slot, layerSlot), ...(flag ? { allow: flag } : {}) });
    allow.push(...rules);
  }
  return { entries, slots, allow };
}

/** A file one trap watches gets the kernel's allow rules of that trap; any other slot none (user space decides). */
function allowRulesOf(info: SlotInfo, slot: number): AllowRule[] {
  const source = info.files[0]?.source;
  if (info.kind !== "file" || info.files.length !== 1 || !source) return [];
  return allowRulesFor(slot, source.allow, { files: source.allowFiles, host: source.allowHost });
}

/** The plan's files, directories and layer files, one per key (the kernel map holds one value per key). */
function slotsOf(plan: WatchPlan): Map<string, SlotInfo> {
  const byId = new Map<string, SlotInfo>();
  const slotInfo = (kind: SlotInfo["kind"], key: FileKey): SlotInfo => {
    const id = slotId(kind, key);
    const info = byId.get(id) ?? { kind, key, files: [], waiting: [], refs: [] };
    byId.set(id, info);
    return info;
  };
  for (const file of plan.files) slotInfo("file", file.resolved.key).files.push(file);
  // A directory that is itself trapped as a file keeps its file entry.
  const isFile = (key: FileKey) => byId.has(slotId("file", key));
  for (const file of plan.files) {
    if (!isFile(file.resolved.parent)) slotInfo("parent", file.resolved.parent).files.push(file);
  }
  for (const miss of plan.unresolved) {
    if (miss.parent !== undefined && !isFile(miss.parent)) slotInfo("parent", miss.parent).waiting.push(miss);
  }
  // A layer file some trap watches as a file (or directory) keeps that entry.
  const taken = (key: FileKey) => isFile(key) || byId.has(slotId("parent", key));
  for (const layer of plan.layers ?? [])
    if (!taken(layer.key)) slotInfo("layer", layer.key).refs.push(...layer.refs);
  return byId;
}

/** The kernel map entry of one slot; `layerSlot` names the slot of an image layer's file, if it has one. */
function entryFor(
  info: SlotInfo,
  slot: number,
  layerSlot: (key: FileKey | undefined) => number | undefined,
): WatchEntry {
  if (info.kind === "layer") {
    const accesses = ACCESS_KINDS.filter((kind) =>
      info.refs.some((r) => trapAccesses(r.trap).includes(kind)),
    );
    // An image layer is read-only: no change of it is reported (the container's copy-up is its own file).
    return { key: info.key, slot, accesses, kind: "file", group: slot };
  }
  const accesses: AccessKind[] =
    info.kind === "parent"
      ? ["write"]
      : ACCESS_KINDS.filter((kind) => info.files.some((f) => trapAccesses(f.ref.trap).includes(kind)));
  const changes = info.kind === "file" && info.files.some((f) => trapChanges(f.ref.trap));
  const group = info.kind === "file" ? layerSlot(info.files[0]?.resolved.lower) : undefined;
  const deny = info.kind === "file" ? strongestDeny(info.files.map((f) => trapDeny(f.ref.trap))) : undefined;
  return {
    key: info.key,
    slot,
    accesses,
    kind: info.kind,
    ...(changes ? { changes } : {}),
    ...(group === undefined ? {} : { group }),
    ...(deny ? { deny } : {}),
  };
}

/**
 * Slot numbers that stay with their file across re-plans: an event already in the ring
 * buffer when the map changes still names the file it was raised for.
 */
export function counterSlots(): (id: string) => number {
  const assigned = new Map<string, number>();
  return (id) => {
    let slot = assigned.get(id);
    if (slot === undefined) {
      slot = assigned.size + 1;
      assigned.set(id, slot);
    }
    return slot;
  };
}

/**
 * The sources an event on a file slot alerts: the traps on that file that want one of its access
 * kinds, or its change (live-traps.ts trapWantsEvent).
 */
export function sourcesFor(
  info: SlotInfo,
  event: { accesses: readonly AccessKind[]; change?: string | undefined },
): WatchedFile[] {
  return info.files.filter((f) => trapWantsEvent(f.ref.trap, event));
}
