/**
 * The kernel map's entries, made from the HiveData the loader arms: one per distinct file or
 * directory. Traps sharing a file share its entry (their accesses united; one that denies makes
 * it deny), and each entry keeps its slot from one sync to the next, so that an event in flight
 * during a resync still names the file it was raised for.
 */
import { type HiveData, inodeOf } from "../../api/data.ts";
import { strongestDeny, trapDeny } from "../../api/policy.ts";
import type { WatchEntry } from "../kernel/contract.ts";
import { ANNOTATION_PARENT, isLayerData, isMissing, keyText, parseKeyText } from "./hive-data.ts";
import { foldGroups } from "./layer-routing.ts";
import { type ArmedData, trapAccesses, trapChanges } from "./live-traps.ts";

/** A kernel entry and the HiveData behind it, by `kind:major:minor:ino`. */
export type IndexedEntries = Map<string, { entry: WatchEntry; data: HiveData[] }>;

interface Wanted {
  accesses: readonly string[];
  changes: boolean;
  deny: WatchEntry["deny"];
}

export class WatchEntries {
  private readonly slotOfKey = new Map<string, number>();
  private readonly freeSlots: number[] = [];
  private nextSlot = 1;

  /** The entries `valid` needs; slots of keys no longer needed are freed for reuse. */
  index(valid: readonly ArmedData[]): IndexedEntries {
    const byKey: IndexedEntries = new Map();
    for (const { data: d, trap } of valid) {
      const { major, minor } = d.spec.device;
      const ino = inodeOf(d.spec);
      if (!isMissing(d) && ino !== undefined)
        this.add(byKey, keyText({ major, minor, ino }), "file", d, {
          accesses: trapAccesses(trap.trap),
          changes: trapChanges(trap.trap),
          // A layer's file is every container's of the image, selected or not: never denied.
          deny: isLayerData(d) ? undefined : trapDeny(trap.trap),
        });
      const parent = d.metadata.annotations?.[ANNOTATION_PARENT];
      if (parent)
        this.add(byKey, parent, "parent", d, { accesses: ["write"], changes: false, deny: undefined });
    }
    foldGroups(byKey);
    for (const [id, slot] of [...this.slotOfKey]) {
      if (byKey.has(id)) continue;
      this.slotOfKey.delete(id);
      this.freeSlots.push(slot);
    }
    return byKey;
  }

  private add(byKey: IndexedEntries, text: string, kind: "file" | "parent", d: HiveData, want: Wanted): void {
    const key = parseKeyText(text);
    if (!key) return;
    const id = `${kind}:${text}`;
    let slot = this.slotOfKey.get(id);
    if (slot === undefined) {
      slot = this.freeSlots.pop() ?? this.nextSlot++;
      this.slotOfKey.set(id, slot);
    }
    const have = byKey.get(id);
    if (!have) {
      const entry: WatchEntry = { key, slot, accesses: want.accesses as WatchEntry["accesses"], kind };
      if (want.changes) entry.changes = true;
      if (want.deny) entry.deny = want.deny;
      byKey.set(id, { entry, data: [d] });
      return;
    }
    have.data.push(d);
    const deny = strongestDeny([have.entry.deny, want.deny]);
    have.entry = {
      ...have.entry,
      accesses: [...new Set([...have.entry.accesses, ...want.accesses])] as WatchEntry["accesses"],
      ...(want.changes || have.entry.changes ? { changes: true } : {}),
      ...(deny ? { deny } : {}),
    };
  }
}
