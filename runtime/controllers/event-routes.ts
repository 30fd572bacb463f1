/**
 * The loader's routes from a kernel event to the HiveData behind it: by the file's identity
 * (`kind:major:minor:ino`), never by slot alone, since slots are one process's numbering. Two
 * exceptions, both for events raised before the routes caught up with the kernel:
 * - a key a sync removed is kept a while (`retiredMs`): a file's deletion or replacement may reach
 *   the loader after the re-resolution its directory's change asked for; it still routes to the
 *   HiveData that exist (re-resolved), never to deleted ones;
 * - a file the kernel armed itself (renamed over a trapped one, KernelEvent.followed) is known by
 *   the slot it copied: routed by slot, only when that slot is this loader's own numbering.
 */
import type { HiveData } from "../../api/data.ts";
import type { KernelEvent, WatchEntry } from "../kernel/contract.ts";
import { keyText } from "./hive-data.ts";

export interface Route {
  entry: WatchEntry;
  data: HiveData[];
}

export class EventRoutes {
  private byKeyId = new Map<string, Route>();
  private bySlot = new Map<number, Route>();
  private readonly retired = new Map<string, { route: Route; until: number }>();
  /** CLOCK_MONOTONIC ns of the first sync: from then on the kernel map's slots are this loader's. */
  private ownSlotsSinceNs: bigint | undefined;
  private readonly retiredMs: number;
  /** Whether a HiveData still exists (a retired route never reaches a deleted one). */
  private readonly exists: (d: HiveData) => boolean;

  constructor(options: { retiredMs: number; exists: (d: HiveData) => boolean }) {
    this.retiredMs = options.retiredMs;
    this.exists = options.exists;
  }

  get size(): number {
    return this.byKeyId.size;
  }

  routes(): IterableIterator<Route> {
    return this.byKeyId.values();
  }

  /** The routes a sync wrote to the kernel map (`synced`), or that a snapshot says it holds. */
  replace(byKey: Map<string, Route>, synced: boolean, now = Date.now()): void {
    if (synced) {
      this.ownSlotsSinceNs ??= process.hrtime.bigint();
      for (const [id, held] of this.retired) if (held.until <= now || byKey.has(id)) this.retired.delete(id);
      for (const [id, route] of this.byKeyId)
        if (!byKey.has(id)) this.retired.set(id, { route, until: now + this.retiredMs });
    }
    this.byKeyId = byKey;
    this.bySlot = new Map([...byKey.values()].map((v) => [v.entry.slot, v]));
  }

  /**
   * The file entry the last sync wrote for the event's key; undefined before any sync (the kernel
   * map may still be an earlier agent's, numbered its own way) or when the key is gone.
   */
  synced(event: KernelEvent): WatchEntry | undefined {
    if (this.ownSlotsSinceNs === undefined) return undefined;
    return this.byKeyId.get(`file:${keyText(event.key)}`)?.entry;
  }

  /** The HiveData behind a slot of the last sync. */
  lookup(slot: number): readonly HiveData[] {
    return this.bySlot.get(slot)?.data ?? [];
  }

  /** Where an event goes: its own kind's entry first, then the other kind's (one key, one value). */
  find(event: KernelEvent): Route | undefined {
    const text = keyText(event.key);
    const other = event.kind === "parent" ? "file" : "parent";
    return (
      this.byId(`${event.kind}:${text}`) ??
      this.byId(`${other}:${text}`) ??
      (event.followed ? this.followed(event) : undefined)
    );
  }

  private byId(id: string): Route | undefined {
    return this.byKeyId.get(id) ?? this.stillHeld(this.retired.get(id)?.route);
  }

  /** A retired route's HiveData that still exist (re-resolved, not deleted): undefined when none does. */
  private stillHeld(route: Route | undefined): Route | undefined {
    const live = route?.data.filter(this.exists) ?? [];
    return route && live.length > 0 ? { entry: route.entry, data: live } : undefined;
  }

  private followed(event: KernelEvent): Route | undefined {
    if (this.ownSlotsSinceNs === undefined || event.ktimeNs < this.ownSlotsSinceNs) return undefined;
    // A slot retired since is that file's (a current holder may be another file the slot went to).
    let latest: { route: Route; until: number } | undefined;
    for (const held of this.retired.values())
      if (held.route.entry.slot === event.slot && held.route.entry.kind === "file")
        if (!latest || held.until > latest.until) latest = held;
    if (latest) return this.stillHeld(latest.route);
    const current = this.bySlot.get(event.slot);
    return current?.entry.kind === "file" ? current : undefined;
  }
}
