/**
 * The traps of the live HivePolicies, by trap id: what the loader arms a HiveData with and
 * alerts by. A HiveData says which file (and, by its `trap-id` label, which trap); where its
 * alerts go, what is allowed, the accesses reported and whose tenancy applies are read here, from
 * the policy, because a HiveData can be written by others than the platform team (a compromised
 * node for its own kernel, a wildcard role).
 */
import type { HiveData } from "../../api/data.ts";
import { trapId } from "../../api/ids.ts";
import { ACCESS_KINDS, type AccessKind } from "../../api/meta.ts";
import type { HivePolicy, HiveTrap } from "../../api/policy.ts";

export interface LiveTrap {
  trapId: string;
  /** The HivePolicy holding the trap: its namespace decides tenancy. */
  policy: { namespace: string; name: string };
  trap: HiveTrap;
}

/** The traps of `policies`, by id; a policy being deleted holds none. */
export function indexLiveTraps(policies: Iterable<HivePolicy>): Map<string, LiveTrap> {
  const byId = new Map<string, LiveTrap>();
  for (const p of policies) {
    if (p.metadata.deletionTimestamp) continue;
    const policy = { namespace: p.metadata.namespace ?? "default", name: p.metadata.name ?? "" };
    for (const trap of p.spec.traps) {
      const id = trapId(policy, trap);
      byId.set(id, { trapId: id, policy, trap });
    }
  }
  return byId;
}

/** A watched HiveData with the live trap it belongs to: what an access is alerted with. */
export interface ArmedData {
  data: HiveData;
  trap: LiveTrap;
}

/** The access kinds a live trap reports (all of them when it names none). */
export function trapAccesses(trap: HiveTrap): readonly AccessKind[] {
  return trap.accesses ?? ACCESS_KINDS;
}

/** Whether a trap alerts on changes of its file (deleted, renamed, replaced, truncated): unless it opts out. */
export function trapChanges(trap: HiveTrap): boolean {
  return trap.changes !== false;
}

/**
 * Whether an event on a trap's file alerts that trap: a change when the trap reports changes,
 * whatever its `accesses`; an access of a kind it reports. An event with neither a change nor a
 * decoded kind (only MAY_ACCESS) still means the file was touched: it alerts every trap on it.
 */
export function trapWantsEvent(
  trap: HiveTrap,
  event: { accesses: readonly AccessKind[]; change?: string | undefined },
): boolean {
  if (event.change !== undefined && trapChanges(trap)) return true;
  if (event.accesses.length === 0) return event.change === undefined;
  const kinds = trapAccesses(trap);
  return event.accesses.some((a) => kinds.includes(a));
}
