/**
 * What the loader knows of the cluster: the HivePolicies and the HiveData of its kernel, as the
 * watches last showed them, and the live traps indexed from those policies. A restarted loader
 * starts from the routing snapshot (routing-snapshot.ts); what only the snapshot held is
 * provisional, and gone at the first pass after the lists unless they held it too.
 */
import type { HiveData } from "../../api/data.ts";
import { LABEL_KERNEL_ID, LABEL_TRAP_ID } from "../../api/meta.ts";
import type { HivePolicy } from "../../api/policy.ts";
import { type ArmedData, indexLiveTraps, type LiveTrap } from "./live-traps.ts";
import { objectKey, specProblems, type WatchEventType } from "./ports.ts";
import type { RoutingSnapshot } from "./routing-snapshot.ts";

export class LoaderCache {
  /** This kernel's HiveData, by `namespace/name`. */
  private readonly byKey = new Map<string, HiveData>();
  private readonly policies = new Map<string, HivePolicy>();
  /** The live traps by id, rebuilt after a policy change (undefined until then). */
  private traps: Map<string, LiveTrap> | undefined;
  /** Objects known only from the snapshot (`policy:` or `data:` and their key). */
  private readonly provisional = new Set<string>();
  private readonly kernelId: string;

  constructor(kernelId: string, seed?: RoutingSnapshot) {
    this.kernelId = kernelId;
    for (const p of seed?.policies ?? []) {
      this.policies.set(objectKey(p), p);
      this.provisional.add(`policy:${objectKey(p)}`);
    }
    for (const d of seed?.data ?? []) {
      if (!this.ofKernel(d)) continue;
      this.byKey.set(objectKey(d), d);
      this.provisional.add(`data:${objectKey(d)}`);
    }
  }

  /** Whether `d` is for this loader's kernel (the others are another loader's). */
  ofKernel(d: HiveData): boolean {
    return d.metadata.labels?.[LABEL_KERNEL_ID] === this.kernelId;
  }

  /** This kernel's HiveData, by `namespace/name`. */
  get data(): ReadonlyMap<string, HiveData> {
    return this.byKey;
  }

  has(d: HiveData): boolean {
    return this.byKey.has(objectKey(d));
  }

  policyList(): HivePolicy[] {
    return [...this.policies.values()];
  }

  /** The live trap a HiveData belongs to, or undefined when no live policy holds it. */
  trapOf(d: HiveData): LiveTrap | undefined {
    this.traps ??= indexLiveTraps(this.policies.values());
    return this.traps.get(d.metadata.labels?.[LABEL_TRAP_ID] ?? "");
  }

  /** Those of `data` whose trap is live, each with it. */
  armed(data: Iterable<HiveData>): ArmedData[] {
    const armed: ArmedData[] = [];
    for (const d of data) {
      const trap = this.trapOf(d);
      if (trap) armed.push({ data: d, trap });
    }
    return armed;
  }

  /** The lists are in: what the snapshot held and they did not is gone. */
  settle(): void {
    if (this.provisional.size === 0) return;
    for (const key of this.provisional) {
      const [kind, ...rest] = key.split(":");
      if (kind === "policy") this.policies.delete(rest.join(":"));
      else this.byKey.delete(rest.join(":"));
    }
    this.provisional.clear();
    this.traps = undefined;
  }

  /**
   * Takes a policy event (one with an invalid spec holds no trap); true when the policy's traps
   * changed: it came, went, or its spec did (a status write changes none).
   */
  onPolicy(type: WatchEventType, policy: HivePolicy): boolean {
    const key = objectKey(policy);
    this.provisional.delete(`policy:${key}`);
    const had = this.policies.get(key);
    if (type === "DELETED" || specProblems(policy)) this.policies.delete(key);
    else this.policies.set(key, policy);
    this.traps = undefined;
    const now = this.policies.get(key);
    return (
      (had === undefined) !== (now === undefined) || JSON.stringify(had?.spec) !== JSON.stringify(now?.spec)
    );
  }

  /** Takes an event of this kernel's HiveData (the caller checks `ofKernel`). */
  onData(type: WatchEventType, d: HiveData): void {
    const key = objectKey(d);
    this.provisional.delete(`data:${key}`);
    if (type === "DELETED") this.byKey.delete(key);
    else this.byKey.set(key, d);
  }

  /** This loader deleted the HiveData `key` (an orphan). */
  deleted(key: string): void {
    this.byKey.delete(key);
  }
}
