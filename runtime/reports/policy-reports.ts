/**
 * Hive's PolicyReports, kept by the pods role (one writer per cluster, elected): the accesses
 * folded from the agents' access Events (access-folds.ts), the results computed from what the role
 * holds (report-results.ts), and the bounded writer (report-writer.ts). Until the role's caches are
 * filled, Events wait: the fails a previous writer left in the reports are taken up first, so an
 * Event both of them saw is counted once.
 */
import type { CoreV1Event } from "@kubernetes/client-node";
import { DEFAULT_FAIL_WINDOW_SECONDS, type PolicyReport, type ReportFormat } from "../../api/report.ts";
import type { WatchEventType } from "../controllers/ports.ts";
import type { Logger } from "../log.ts";
import { AccessFolds } from "./access-folds.ts";
import { createAccessOrigin, type PlacementLookup } from "./access-origin.ts";
import { type ReportInputs, reportResults } from "./report-results.ts";
import {
  createReportWriter,
  DEFAULT_DEBOUNCE_MS,
  type ReportClient,
  type ReportWriterStats,
} from "./report-writer.ts";

export interface PolicyReportsOptions {
  client: ReportClient;
  format: ReportFormat;
  log: Logger;
  nodeName: string;
  platformNamespace: string;
  debounceMs?: number;
  failWindowMs?: number;
  maxResults?: number;
  /** Where an accessed pod runs (an access Event counts only from that node: access-origin.ts). */
  placement: PlacementLookup;
  /** Events that waited for their pod's lookup were folded: the role recomputes. */
  onFolded: () => void;
}

export type ReportSources = Pick<ReportInputs, "policies" | "data" | "trapErrors" | "uncovered">;

export interface PolicyReports {
  onAccessEvent(type: WatchEventType, event: CoreV1Event): void;
  onReport(type: WatchEventType, report: PolicyReport): void;
  /** The role's caches are filled: take up the reports' fails, then the Events that came meanwhile. */
  markSynced(): void;
  /**
   * Recomputes every namespace's results (the writer writes what changed, debounced). Returns in
   * how many ms to call again: when the oldest fail leaves its window, or, when called too soon
   * after the last recompute, when the next one is due.
   */
  update(sources: ReportSources): number | undefined;
  flush(): Promise<void>;
  stats(): ReportWriterStats & { fails: number; rejectedEvents: number };
  stop(): void;
}

export function createPolicyReports(options: PolicyReportsOptions): PolicyReports {
  const failWindowMs = options.failWindowMs ?? DEFAULT_FAIL_WINDOW_SECONDS * 1000;
  const writer = createReportWriter({
    client: options.client,
    log: options.log,
    nodeName: options.nodeName,
    format: options.format,
    ...(options.debounceMs !== undefined ? { debounceMs: options.debounceMs } : {}),
    ...(options.maxResults !== undefined ? { maxResults: options.maxResults } : {}),
  });
  const folds = new AccessFolds();
  /** Access Events alive on the server (namespace/name): what a fail's fold memory may keep. */
  const live = new Set<string>();
  let waiting: Map<string, [WatchEventType, CoreV1Event]> | undefined = new Map();
  // A recompute walks every selected pod: at most one per half debounce (the writes wait a
  // debounce anyway), so a busy cluster's pods passes do not each pay for it.
  const minIntervalMs = Math.max(100, (options.debounceMs ?? DEFAULT_DEBOUNCE_MS) / 2);
  let computedAt = Number.NEGATIVE_INFINITY;

  const origin = createAccessOrigin({
    lookup: options.placement,
    fold: (type, event) => folds.onEvent(type, event),
    onFolded: options.onFolded,
    log: options.log,
  });
  const fold = (type: WatchEventType, event: CoreV1Event) => {
    const name = `${event.metadata?.namespace}/${event.metadata?.name}`;
    if (type === "DELETED") live.delete(name);
    else live.add(name);
    origin.check(type, event);
  };

  return {
    onAccessEvent(type, event) {
      if (waiting) waiting.set(`${event.metadata?.namespace}/${event.metadata?.name}`, [type, event]);
      else fold(type, event);
    },
    onReport(type, report) {
      writer.observe(type, report);
    },
    markSynced() {
      if (!waiting) return;
      for (const report of writer.observed()) folds.seed(report);
      for (const [type, event] of waiting.values()) fold(type, event);
      waiting = undefined;
    },
    update(sources) {
      if (waiting) return undefined;
      const now = Date.now();
      if (now - computedAt < minIntervalMs) return computedAt + minIntervalMs - now;
      computedAt = now;
      folds.prune(now, failWindowMs, live);
      origin.retain(new Set(Array.from(folds.values(), (f) => `${f.namespace}/${f.pod}`)));
      let oldest = Number.POSITIVE_INFINITY;
      for (const f of folds.values()) oldest = Math.min(oldest, f.lastAccess);
      writer.desire(
        reportResults({
          ...sources,
          platformNamespace: options.platformNamespace,
          fails: folds.values(),
          now,
          failWindowMs,
        }),
      );
      return oldest === Number.POSITIVE_INFINITY
        ? undefined
        : Math.max(1000, oldest + failWindowMs - now + 1);
    },
    flush: () => writer.flush(),
    stats: () => ({ ...writer.stats(), fails: folds.size, rejectedEvents: origin.rejected }),
    stop: () => writer.stop(),
  };
}
