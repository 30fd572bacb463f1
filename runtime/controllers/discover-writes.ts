/**
 * The writes that make this node's HiveData equal to a discover pass's result: create or
 * replace what changed; delete what is no longer wanted, but only once the HiveData list is in
 * (before it, absence proves nothing) and never what the pass kept through a transient failure.
 * A failed write is retried by a later pass once its object's own backoff has passed (the watch
 * brings the current object meanwhile): one object that keeps failing holds up no other.
 */
import type { HiveData } from "../../api/data.ts";
import type { Logger } from "../log.ts";
import { dataUpToDate } from "./hive-data.ts";
import { inPool } from "./in-pool.ts";
import type { ObjectRetries } from "./object-retries.ts";
import type { DataWriter } from "./ports.ts";

export interface DataChanges {
  /** The HiveData the pass wants, by namespace/name. */
  desired: ReadonlyMap<string, HiveData>;
  /** Names the pass could not decide (transient failures): left as they are. */
  keep: ReadonlySet<string>;
}

export interface ApplyOptions {
  writer: DataWriter;
  /** This node's HiveData as last seen, by namespace/name: updated as writes succeed. */
  data: Map<string, HiveData>;
  /** The HiveData list is in: deletions are safe. */
  synced: boolean;
  concurrency: number;
  log: Logger;
  /** Writes that failed, each on its own backoff. */
  retries: ObjectRetries;
  /** Asks for another pass in `delayMs`. */
  retry: (delayMs: number) => void;
  /** Each object about to be created or replaced (discover.ts DiscoverOptions.onDesired). */
  onWrite?: (d: HiveData) => void;
  stats: { created: number; updated: number; deleted: number };
}

export async function applyDataChanges(changes: DataChanges, o: ApplyOptions): Promise<void> {
  const { data, writer, stats } = o;
  const writes: (() => Promise<void>)[] = [];
  const now = Date.now();
  for (const [key, want] of changes.desired) {
    const have = data.get(key);
    if (have && dataUpToDate(have, want)) {
      o.retries.forget(key);
      continue;
    }
    // Armed by this agent's loader before (and whether or not) the write goes through.
    o.onWrite?.(want);
    if (!o.retries.due(key, now)) continue;
    writes.push(async () => {
      try {
        if (have) {
          want.metadata.resourceVersion = have.metadata.resourceVersion;
          data.set(key, await writer.replace(want));
          stats.updated += 1;
        } else {
          data.set(key, await writer.create(want));
          stats.created += 1;
        }
        o.retries.forget(key);
      } catch (error) {
        // Conflict or AlreadyExists: the watch brings the current object, and with it another pass.
        const delayMs = o.retries.failed(key, now);
        o.log.warn("HiveData write failed; retried", { name: key, delayMs, error });
      }
    });
  }
  if (o.synced) {
    for (const [key, have] of data) {
      if (changes.desired.has(key) || changes.keep.has(key) || !o.retries.due(key, now)) continue;
      writes.push(async () => {
        try {
          await writer.remove(have.metadata.namespace ?? "default", have.metadata.name ?? "");
        } catch (error) {
          const delayMs = o.retries.failed(key, now);
          o.log.warn("HiveData delete failed; retried", { name: key, delayMs, error });
          return;
        }
        data.delete(key);
        o.retries.forget(key);
        stats.deleted += 1;
      });
    }
  }
  await inPool(writes, o.concurrency, (w) => w());
  const next = o.retries.nextDueInMs();
  if (next !== Number.POSITIVE_INFINITY) o.retry(Math.max(100, next));
}
