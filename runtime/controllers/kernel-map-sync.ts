/**
 * The loader's writes to the kernel: its watch map made equal to the armed HiveData (one entry per
 * distinct file, watch-entries.ts), the quiet map cleared when what selects a layer's access may
 * have changed, and the routes the event path finds HiveData by replaced to match. After each sync
 * the routing snapshot is saved, so that a restarted loader routes from it at once.
 */
import type { HiveData } from "../../api/data.ts";
import type { HivePolicy } from "../../api/policy.ts";
import type { KernelWatcher, WatchEntry } from "../kernel/contract.ts";
import type { EventRoutes } from "./event-routes.ts";
import { KernelAllow, type OnKernelAllowed } from "./kernel-allow.ts";
import { layerFingerprint } from "./layer-routing.ts";
import type { ArmedData } from "./live-traps.ts";
import { objectKey } from "./ports.ts";
import type { RoutingSnapshotStore } from "./routing-snapshot.ts";
import { WatchEntries } from "./watch-entries.ts";

export interface KernelMapSyncOptions {
  kernel: KernelWatcher;
  routes: EventRoutes;
  stats: { syncs: number; entries: number; notWatched: number };
  onSynced?:
    | ((entries: readonly WatchEntry[], dataOf: (slot: number) => readonly HiveData[]) => void)
    | undefined;
  snapshot?: RoutingSnapshotStore | undefined;
  /** What the kernel's allow rules let through, by trap and entry (kernel-allow.ts). */
  onAllowed?: OnKernelAllowed | undefined;
}

export class KernelMapSync {
  private readonly o: KernelMapSyncOptions;
  private readonly entries = new WatchEntries();
  /** The layer entries the quiet map was last cleared for (layerFingerprint). */
  private quietFor: string | undefined;
  /** The HiveData written to the kernel's map by the last sync (readiness: traps-armed.ts). */
  private armedKeys = new Set<string>();
  private readonly allow: KernelAllow;

  constructor(options: KernelMapSyncOptions) {
    this.o = options;
    this.allow = new KernelAllow(options.onAllowed);
  }

  /** Hands what the kernel allowed since the last harvest to its traps (the loader calls it on a timer). */
  harvestAllowed(): void {
    this.allow.harvest(this.o.kernel);
  }

  /** Whether the HiveData `namespace/name` was in the kernel's watch map at the last sync. */
  armed(key: string): boolean {
    return this.armedKeys.has(key);
  }

  /**
   * Routes by the snapshot's HiveData until the first sync; the kernel map is left as pinned. Fresh
   * maps (an upgrade to another map layout replaced them) are written from the snapshot now, not
   * from the first list.
   */
  seed(valid: readonly ArmedData[]): void {
    const { kernel, routes, stats } = this.o;
    const byKey = this.entries.index(valid);
    // With their allow rules: a denying trap lets its allow list through from the first write.
    const allow = this.allow.rules(byKey, valid);
    routes.replace(byKey, false);
    if (kernel.counters().watched === 0 && routes.size > 0) {
      stats.notWatched = kernel.sync(
        [...routes.routes()].map((v) => v.entry),
        allow,
      ).notWatched.length;
      this.allow.commit();
    }
  }

  /** Makes the kernel map, then the routes, equal to `valid`; saves the snapshot last. */
  sync(valid: readonly ArmedData[], policies: HivePolicy[], now: number): void {
    const { kernel, routes, stats } = this.o;
    const byKey = this.entries.index(valid);
    // Counted under the traps the kernel's rules were written for, before they change.
    this.allow.harvest(kernel);
    const allow = this.allow.rules(byKey, valid);
    const entries = [...byKey.values()].map((v) => v.entry);
    // Another layer entry, group number or HiveData behind one: what selects may have changed, or a
    // group number gone to another layer. Every quieted cgroup is forgotten before the sync; only
    // the event path quiets again, against the routes written below.
    const layers = layerFingerprint(byKey);
    if (layers !== this.quietFor) {
      kernel.clearQuiet?.();
      this.quietFor = layers;
    }
    // A full map takes what fits (the kernel watcher logs it; readiness, metrics and
    // `hive status` report it) and takes the rest as soon as entries go.
    stats.notWatched = kernel.sync(entries, allow).notWatched.length;
    this.allow.harvest(kernel); // the last counts of keys the sync removed
    this.allow.commit();
    routes.replace(byKey, true, now);
    this.armedKeys = new Set(valid.map((v) => objectKey(v.data)));
    stats.syncs += 1;
    stats.entries = entries.length;
    this.o.onSynced?.(entries, (slot) => routes.lookup(slot));
    this.o.snapshot?.save({ policies, data: valid.map((v) => v.data) });
  }
}
