/**
 * Counts of accesses an allow list let through, per trap and entry, for `hive status`: the
 * Prometheus counter (hive_allowed_accesses_total) serves dashboards, while status — another
 * process on the node, possibly beside `hive watch`, which serves no metrics — reads this
 * small JSON file written beside the watch table (runtime/standalone/watch-table-file.ts).
 * Written atomically (rename), at most once per interval and only after a change, so a busy
 * allowed reader costs a counter increment, not a write.
 */

import { basename } from "node:path";
import type { AllowEntry } from "../../api/policy.ts";
import type { Logger } from "../log.ts";
import { compareCodeUnits } from "../order.ts";
import { readFileIfPresent, writePrivateJsonFile } from "../private-file.ts";
import { WATCH_TABLE_DIR } from "../standalone/watch-table-file.ts";
import { type AlertSource, trapIdOf } from "./alert-source.ts";
import { describeEntry } from "./allowlist.ts";

/** One allow entry of one trap, and how many accesses it allowed. */
export interface AllowedRecord {
  policy: string;
  namespace?: string;
  trapId: string;
  path: string;
  /** The entry's index in the trap's `allow` list (the `entry` label of the metric). */
  entry: number;
  /** The entry as text: `exe=/usr/sbin/sshd`. */
  allow: string;
  count: number;
}

export interface AllowedFile {
  pid: number;
  startedAt: string;
  updatedAt: string;
  records: AllowedRecord[];
}

/** The file describing what the writer of the maps under `pinRoot` allowed: /run/hive/<basename>.allowed.json. */
export function allowedFileFor(pinRoot: string, dir = WATCH_TABLE_DIR): string {
  return `${dir}/${basename(pinRoot)}.allowed.json`;
}

export interface AllowedCounts {
  /** Adds `by` (default 1) accesses the entry allowed. */
  add(source: AlertSource, entry: number, allow: AllowEntry, by?: number): void;
  /** Records sorted by policy, trap and entry. */
  records(): AllowedRecord[];
  /** True once something was added since the last `takeChanged()`. */
  takeChanged(): boolean;
}

/** In-memory counts, bounded: beyond `maxRecords` distinct trap × entry pairs new ones are not tracked (the metric still counts). */
export function createAllowedCounts(maxRecords = 10_000): AllowedCounts {
  const byKey = new Map<string, AllowedRecord>();
  /** The entry object each record's text was described from. */
  const described = new Map<string, object>();
  /**
   * Per source object, its entries' records and the entry each was described from: an access
   * of a source seen before is counted without a key string or a map lookup by text.
   */
  const bySource = new WeakMap<AlertSource, Array<{ record: AllowedRecord; allow: object } | undefined>>();
  let changed = false;
  const recordOf = (source: AlertSource, entry: number, allow: AllowEntry): AllowedRecord | undefined => {
    const trapId = trapIdOf(source);
    const key = `${trapId}\0${entry}`;
    const have = byKey.get(key);
    if (have) {
      // The list may have changed under the same trap id only with the same content; keep the latest text.
      if (described.get(key) !== allow) {
        have.allow = describeEntry(allow);
        described.set(key, allow);
      }
      return have;
    }
    if (byKey.size >= maxRecords) return undefined;
    const record: AllowedRecord = {
      policy: source.annotations.hive_policy_name ?? "",
      trapId,
      path: source.annotations.path ?? "",
      entry,
      allow: describeEntry(allow),
      count: 0,
    };
    if (source.policyNamespace !== undefined) record.namespace = source.policyNamespace;
    byKey.set(key, record);
    described.set(key, allow);
    return record;
  };
  return {
    add(source, entry, allow, by = 1) {
      changed = true;
      const slots = bySource.get(source);
      const known = slots?.[entry];
      if (known !== undefined && known.allow === allow) {
        known.record.count += by;
        return;
      }
      const record = recordOf(source, entry, allow);
      if (!record) return;
      record.count += by;
      if (slots) slots[entry] = { record, allow };
      else bySource.set(source, Object.assign([], { [entry]: { record, allow } }));
    },
    records() {
      return [...byKey.values()]
        .map((r) => ({ ...r }))
        .sort(
          (a, b) =>
            compareCodeUnits(a.namespace ?? "", b.namespace ?? "") ||
            compareCodeUnits(a.policy, b.policy) ||
            compareCodeUnits(a.trapId, b.trapId) ||
            a.entry - b.entry,
        );
    },
    takeChanged() {
      const was = changed;
      changed = false;
      return was;
    },
  };
}

export async function writeAllowedFile(file: string, content: AllowedFile): Promise<void> {
  await writePrivateJsonFile(file, content);
}

export async function readAllowedFile(file: string): Promise<AllowedFile | undefined> {
  const text = await readFileIfPresent(file, "allowed-access counts");
  if (text === undefined) return undefined;
  try {
    const parsed = JSON.parse(text) as AllowedFile;
    return Array.isArray(parsed.records) ? parsed : undefined;
  } catch {
    return undefined; // torn or foreign: the next write replaces it; status shows no counts meanwhile
  }
}

export interface AllowedFileWriter {
  /** Writes now if anything changed since the last write. */
  flush(): Promise<void>;
  /** Stops the timer after a last flush. */
  close(): Promise<void>;
}

/**
 * Writes `counts` to `file` every `intervalMs` while they change. A failed write is logged
 * once per failure streak, never fatal: the file only decorates `hive status`.
 */
export function createAllowedFileWriter(options: {
  file: string;
  counts: AllowedCounts;
  logger: Logger;
  intervalMs?: number;
}): AllowedFileWriter {
  const { file, counts, logger } = options;
  const startedAt = new Date().toISOString();
  let failing = false;
  let running: Promise<void> = Promise.resolve();
  const flush = (): Promise<void> => {
    running = running.then(async () => {
      if (!counts.takeChanged()) return;
      try {
        await writeAllowedFile(file, {
          pid: process.pid,
          startedAt,
          updatedAt: new Date().toISOString(),
          records: counts.records(),
        });
        failing = false;
      } catch (error) {
        if (!failing)
          logger.warn("cannot update the allowed-access counts read by `hive status`", { file, error });
        failing = true;
      }
    });
    return running;
  };
  const timer = setInterval(() => void flush(), options.intervalMs ?? 2_000);
  timer.unref();
  return {
    flush,
    async close() {
      clearInterval(timer);
      await flush();
    },
  };
}
