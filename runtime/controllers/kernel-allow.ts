/**
 * The allow rules the loader writes beside its watch map (allow-rules.ts, bpf/allow.bpf.h), and
 * the counts the kernel keeps of what they let through, handed to the trap they belong to.
 *
 * Only a container's own file watched for one trap gets rules: an image layer's entry is every
 * container's of the image (the kernel lets its check through only right after an allowed own
 * check, allow.bpf.h), and a file several traps share is decided in user space, where each trap
 * judges it by its own list.
 */
import { executablesOf } from "../alerts/alert-source.ts";
import { allowFlagOf, allowRulesFor, takeAllowed } from "../alerts/allow-rules.ts";
import type { AllowRule, KernelWatcher } from "../kernel/contract.ts";
import { isLayerData } from "./hive-data.ts";
import type { ArmedData } from "./live-traps.ts";
import { objectKey } from "./ports.ts";
import type { IndexedEntries } from "./watch-entries.ts";

/** Checks the kernel let through for a trap's file, by allow entry. */
export type OnKernelAllowed = (armed: ArmedData, entry: number, count: number) => void;

export class KernelAllow {
  /** The trap behind each slot with rules, as written by the last sync. */
  private owners = new Map<number, ArmedData>();
  private next = new Map<number, ArmedData>();
  private readonly onAllowed: OnKernelAllowed | undefined;

  constructor(onAllowed: OnKernelAllowed | undefined) {
    this.onAllowed = onAllowed;
  }

  /** The rules of `byKey`'s entries; marks each entry that has some (WatchEntry.allow). */
  rules(byKey: IndexedEntries, valid: readonly ArmedData[]): AllowRule[] {
    const armedByKey = new Map(valid.map((a) => [objectKey(a.data), a]));
    const out: AllowRule[] = [];
    this.next = new Map();
    for (const indexed of byKey.values()) {
      const data = indexed.data[0];
      if (indexed.entry.kind !== "file" || indexed.data.length !== 1 || !data || isLayerData(data)) continue;
      const armed = armedByKey.get(objectKey(data));
      if (!armed) continue;
      const rules = allowRulesFor(indexed.entry.slot, armed.trap.trap.allow, {
        files: executablesOf(data.spec),
      });
      const allow = allowFlagOf(rules);
      if (!allow) continue;
      indexed.entry = { ...indexed.entry, allow };
      this.next.set(indexed.entry.slot, armed);
      out.push(...rules);
    }
    return out;
  }

  /** After the kernel's maps took the rules: counts are told to their new owners from now on. */
  commit(): void {
    this.owners = this.next;
  }

  /** Hands what the kernel allowed since the last harvest to the traps of the slots as last written. */
  harvest(kernel: KernelWatcher): void {
    // A slot of a previous agent's numbering (adopted maps before the first sync) has no owner here.
    if (this.onAllowed) takeAllowed(kernel, (slot) => this.owners.get(slot), this.onAllowed);
  }
}
