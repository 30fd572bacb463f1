/**
 * The loader's orphans: HiveData whose trap no live HivePolicy holds (the reference's HiveData
 * reconciliation). One is kept for a grace period first, since a discover on another node may have
 * seen a new policy before this loader's watch did; then it is deleted, but only this node's
 * (another node's are that node's discover's to remove, or go with its Node). A delete that fails
 * is retried on its own backoff, so that one object cannot hold up the kernel map's sync.
 */
import type { HiveData } from "../../api/data.ts";
import { LABEL_NODE } from "../../api/meta.ts";
import type { Logger } from "../log.ts";
import type { ArmedData } from "./live-traps.ts";
import type { LoaderCache } from "./loader-cache.ts";
import { createObjectRetries } from "./object-retries.ts";
import type { DataWriter } from "./ports.ts";

/** What to do with an orphan now. */
export type OrphanVerdict =
  /** Its grace is over and it is this node's, with no failed delete waiting out its backoff. */
  | { delete: true }
  /** Still in its grace: look again in `waitMs`. */
  | { waitMs: number }
  /** Past its grace but not this agent's to delete now (another node's, or backing off). */
  | { leave: true };

export interface OrphansOptions {
  graceMs: number;
  /** This agent's node: only its HiveData are this loader's to delete. */
  nodeName: string;
  writer: DataWriter;
  log: Logger;
  stats: { orphansDeleted: number };
  /** Asks for another pass in `delayMs` (a grace ends, a failed delete is due). */
  retryIn: (delayMs: number) => void;
}

export class Orphans {
  /** When each orphan was first seen without a live trap. */
  private readonly since = new Map<string, number>();
  /** Deletes that failed, each on its own backoff. */
  private readonly deletes = createObjectRetries();
  private readonly o: OrphansOptions;

  constructor(options: OrphansOptions) {
    this.o = options;
  }

  /**
   * The cached HiveData whose trap is live, each with it; the others are orphans, each deleted
   * once its grace is over. One delete at a time, each awaited: the cache may change meanwhile.
   */
  async sweep(cache: LoaderCache, now: number): Promise<ArmedData[]> {
    const valid: ArmedData[] = [];
    for (const [key, d] of cache.data) {
      const trap = cache.trapOf(d);
      if (trap) {
        this.since.delete(key);
        valid.push({ data: d, trap });
        continue;
      }
      const verdict = this.verdict(key, d, now);
      if ("waitMs" in verdict) this.o.retryIn(verdict.waitMs);
      else if ("delete" in verdict) await this.delete(cache, key, d, now);
    }
    const next = this.deletes.nextDueInMs(now);
    if (next !== Number.POSITIVE_INFINITY) this.o.retryIn(Math.max(100, next));
    return valid;
  }

  /** Records `d` (by `key`) as an orphan, if not yet, and says what to do with it now. */
  verdict(key: string, d: HiveData, now: number): OrphanVerdict {
    const since = this.since.get(key) ?? now;
    this.since.set(key, since);
    if (now - since < this.o.graceMs) return { waitMs: this.o.graceMs - (now - since) };
    if (d.metadata.labels?.[LABEL_NODE] !== this.o.nodeName || !this.deletes.due(key, now))
      return { leave: true };
    return { delete: true };
  }

  /** Deleted, by this loader or by someone else: nothing more is kept for it. */
  forget(key: string): void {
    this.since.delete(key);
    this.deletes.forget(key);
  }

  /** One delete that keeps failing must not hold the kernel map's sync: it is retried alone. */
  private async delete(cache: LoaderCache, key: string, d: HiveData, now: number): Promise<void> {
    const { writer, log } = this.o;
    try {
      await writer.remove(d.metadata.namespace ?? "default", d.metadata.name ?? "");
    } catch (error) {
      const delayMs = this.deletes.failed(key, now);
      log.warn("deleting HiveData whose trap no longer exists failed; retried", {
        name: key,
        delayMs,
        error,
      });
      return;
    }
    log.info("deleted HiveData whose trap no longer exists", { name: key });
    cache.deleted(key);
    this.forget(key);
    this.o.stats.orphansDeleted += 1;
  }
}
