/**
 * Writes Hive's PolicyReport of each namespace, aggregated and bounded: a namespace's report is
 * written at most once per `debounceMs` (Kyverno waits 30 s too) after this writer's first write of
 * it, however many accesses or pods changed meanwhile; only when what it says differs from what the API server holds (so a report
 * changed by anyone else is put back); with at most `maxResults` results (fails and errors first;
 * the summary counts all, an annotation says how many were left out); and deleted when its
 * namespace has no result left. API writes per minute grow with namespaces, not accesses.
 */
import { LABEL_MANAGED_BY, MANAGED_BY } from "../../api/meta.ts";
import {
  ANNOTATION_REPORT_WRITER,
  ANNOTATION_RESULTS_OMITTED,
  MAX_REPORT_RESULTS,
  type PolicyReport,
  REPORT_FORMATS,
  REPORT_NAME,
  RESULTS,
  type ReportFormat,
  type ReportResult,
  type ReportSummary,
  reportApiVersion,
} from "../../api/report.ts";
import type { Logger } from "../log.ts";

/** A namespace's report is written at most once per this (Kyverno waits as long). */
export const DEFAULT_DEBOUNCE_MS = 30_000;

/** A namespace's first write by a writer waits this long (or the debounce, if shorter). */
export const FIRST_WRITE_MS = 5_000;

/** The API calls the writer makes (runtime/reports/kube-report-client.ts). */
export interface ReportClient {
  create(report: PolicyReport): Promise<void>;
  /** Replaces the report at `resourceVersion` (a conflict rejects). */
  replace(report: PolicyReport, resourceVersion: string): Promise<void>;
  remove(namespace: string): Promise<void>;
}

export interface ReportWriterOptions {
  client: ReportClient;
  log: Logger;
  /** The writer's node, named in the report (admission binds it to the writer's token). */
  nodeName: string;
  format: ReportFormat;
  debounceMs?: number;
  maxResults?: number;
}

export interface ReportWriterStats {
  created: number;
  replaced: number;
  deleted: number;
  failed: number;
}

export interface ReportWriter {
  /** The results every namespace's report must hold now; a namespace left out has none. */
  desire(byNamespace: ReadonlyMap<string, readonly ReportResult[]>): void;
  /** A report as the API server holds it (from a watch). */
  observe(type: "ADDED" | "MODIFIED" | "DELETED", report: PolicyReport): void;
  /** The reports observed so far (read by a new writer to go on from them). */
  observed(): IterableIterator<PolicyReport>;
  /** Writes every namespace whose write is due or pending now, and waits for it. */
  flush(): Promise<void>;
  stats(): ReportWriterStats;
  stop(): void;
}

/** The report a namespace's results make: summary over all, results capped. */
export function buildReport(
  format: ReportFormat,
  namespace: string,
  results: readonly ReportResult[],
  nodeName: string,
  maxResults = MAX_REPORT_RESULTS,
): PolicyReport {
  const summary = Object.fromEntries(RESULTS.map((r) => [r, 0])) as Required<ReportSummary>;
  for (const r of results) summary[r.result ?? "pass"] += 1;
  const kept = results.slice(0, maxResults);
  const omitted = results.length - kept.length;
  return {
    apiVersion: reportApiVersion(format),
    kind: REPORT_FORMATS[format].kind,
    metadata: {
      name: REPORT_NAME,
      namespace,
      labels: { [LABEL_MANAGED_BY]: MANAGED_BY },
      annotations: {
        [ANNOTATION_REPORT_WRITER]: nodeName,
        ...(omitted > 0 ? { [ANNOTATION_RESULTS_OMITTED]: String(omitted) } : {}),
      },
    },
    summary,
    results: kept,
  };
}

/** `said` of each report object, computed once: a pass compares every namespace's report. */
const saidCache = new WeakMap<PolicyReport, string>();

/** A result as a list in a fixed order, whatever order the server's JSON put its fields in. */
const resultFields = (r: ReportResult): unknown[] => [
  r.policy,
  r.rule,
  r.result,
  r.severity,
  r.source,
  r.category,
  r.message,
  r.scored,
  r.timestamp?.seconds,
  r.timestamp?.nanos,
  r.resources?.map((x) => [x.apiVersion, x.kind, x.namespace, x.name, x.uid]),
  r.properties &&
    Object.keys(r.properties)
      .sort()
      .map((k) => [k, r.properties?.[k]]),
];

/** What a report says (not who wrote it, nor its version): equal text, no write. */
function said(report: PolicyReport | undefined): string {
  if (!report) return "";
  const cached = saidCache.get(report);
  if (cached !== undefined) return cached;
  const notes = report.metadata.annotations ?? {};
  const text = JSON.stringify([
    report.metadata.labels?.[LABEL_MANAGED_BY] ?? "",
    notes[ANNOTATION_RESULTS_OMITTED] ?? "",
    RESULTS.map((k) => report.summary?.[k] ?? 0),
    (report.results ?? []).map(resultFields),
  ]);
  saidCache.set(report, text);
  return text;
}

/** What a writer holds between calls: what is wanted, what the server showed, what is pending. */
interface WriterState {
  readonly client: ReportClient;
  readonly log: Logger;
  readonly nodeName: string;
  readonly format: ReportFormat;
  readonly maxResults: number | undefined;
  readonly debounceMs: number;
  readonly firstWriteMs: number;
  /** Namespace → the report it must hold; a namespace left out must hold none. */
  readonly desired: Map<string, PolicyReport>;
  /** JSON of the results each desired report was built from. */
  readonly desiredText: Map<string, string>;
  /** Namespace → its report as the API server last showed it. */
  readonly seen: Map<string, PolicyReport>;
  /** Namespace → when this writer last wrote it; the next write waits a debounce after. */
  readonly lastWrite: Map<string, number>;
  /** Namespace → the timer of its write, set for each namespace whose write is due. */
  readonly timers: Map<string, NodeJS.Timeout>;
  readonly stats: ReportWriterStats;
  /** Writes run one after another on this chain. */
  writing: Promise<void>;
  stopped: boolean;
  /** Nothing is written before the first desire: until then every report seen would look unwanted. */
  desiredOnce: boolean;
}

function newWriterState(options: ReportWriterOptions): WriterState {
  const debounceMs = options.debounceMs ?? DEFAULT_DEBOUNCE_MS;
  return {
    client: options.client,
    log: options.log,
    nodeName: options.nodeName,
    format: options.format,
    maxResults: options.maxResults,
    debounceMs,
    firstWriteMs: Math.min(FIRST_WRITE_MS, debounceMs),
    desired: new Map(),
    desiredText: new Map(),
    seen: new Map(),
    lastWrite: new Map(),
    timers: new Map(),
    stats: { created: 0, replaced: 0, deleted: 0, failed: 0 },
    writing: Promise.resolve(),
    stopped: false,
    desiredOnce: false,
  };
}

export function createReportWriter(options: ReportWriterOptions): ReportWriter {
  const state = newWriterState(options);
  return {
    desire(byNamespace) {
      for (const ns of applyDesire(state, byNamespace)) schedule(state, ns);
    },
    observe(type, report) {
      const ns = applyObserved(state, type, report);
      if (ns !== undefined) schedule(state, ns);
    },
    observed: () => state.seen.values(),
    flush: () => flushNow(state),
    stats: () => ({ ...state.stats }),
    stop() {
      state.stopped = true;
      for (const timer of state.timers.values()) clearTimeout(timer);
      state.timers.clear();
    },
  };
}

function differs(state: WriterState, ns: string): boolean {
  return said(state.desired.get(ns)) !== said(state.seen.get(ns));
}

/**
 * Records what every namespace's report must hold now, and returns the namespaces to look at
 * again: every one desired or seen.
 */
function applyDesire(
  state: WriterState,
  byNamespace: ReadonlyMap<string, readonly ReportResult[]>,
): Set<string> {
  const { desired, desiredText } = state;
  state.desiredOnce = true;
  for (const ns of [...desired.keys()]) if (!byNamespace.has(ns)) desired.delete(ns);
  for (const [ns, results] of byNamespace) {
    // Results come in a stable order and shape: an unchanged namespace keeps its report
    // object, and with it the comparison text already computed.
    const text = JSON.stringify(results);
    if (results.length === 0) desired.delete(ns);
    else if (desiredText.get(ns) !== text || !desired.has(ns))
      desired.set(ns, buildReport(state.format, ns, results, state.nodeName, state.maxResults));
    desiredText.set(ns, text);
  }
  for (const ns of [...desiredText.keys()]) if (!desired.has(ns)) desiredText.delete(ns);
  return new Set([...desired.keys(), ...state.seen.keys()]);
}

/** Records a report as the server holds it; returns its namespace, or undefined when it is not Hive's report. */
function applyObserved(
  state: WriterState,
  type: "ADDED" | "MODIFIED" | "DELETED",
  report: PolicyReport,
): string | undefined {
  const ns = report.metadata.namespace;
  if (report.metadata.name !== REPORT_NAME) return undefined;
  if (type === "DELETED") state.seen.delete(ns);
  else state.seen.set(ns, report);
  return ns;
}

/**
 * How long until `ns` is written, or undefined when no write is to be set up: one debounce after
 * its previous write, the changes in between folding into it; a namespace this writer has not
 * written yet waits a few seconds only (a first finding shows within seconds, and a burst of them
 * still makes one write).
 */
function writeDelay(state: WriterState, ns: string): number | undefined {
  if (state.stopped || !state.desiredOnce || state.timers.has(ns) || !differs(state, ns)) return undefined;
  const last = state.lastWrite.get(ns);
  return last === undefined ? state.firstWriteMs : Math.max(0, last + state.debounceMs - Date.now());
}

/** Sets the timer of the write of `ns`, when one is due and none is set. */
function schedule(state: WriterState, ns: string): void {
  const wait = writeDelay(state, ns);
  if (wait === undefined) return;
  const timer = setTimeout(() => {
    state.timers.delete(ns);
    enqueueWrite(state, ns);
  }, wait);
  timer.unref?.();
  state.timers.set(ns, timer);
}

function enqueueWrite(state: WriterState, ns: string): void {
  state.writing = state.writing.then(() => write(state, ns));
}

/** Writes every namespace whose timer is set now, and waits for all writes. */
async function flushNow(state: WriterState): Promise<void> {
  for (const [ns, timer] of state.timers) {
    clearTimeout(timer);
    state.timers.delete(ns);
    enqueueWrite(state, ns);
  }
  await state.writing;
}

/** One write, from what is desired and what the server last showed (never from what was sent). */
async function write(state: WriterState, ns: string): Promise<void> {
  if (state.stopped || !differs(state, ns)) return;
  state.lastWrite.set(ns, Date.now());
  try {
    await send(state, ns);
  } catch (error) {
    state.stats.failed += 1;
    state.log.warn("PolicyReport write failed; written again after the next debounce", {
      report: `${ns}/${REPORT_NAME}`,
      status: (error as { code?: number }).code,
      error,
    });
  }
  // The server's copy comes back through the watch well within a debounce; should it not, or
  // should the write have failed, the next one puts the report right.
  schedule(state, ns);
}

/** The one API call that makes the server's report of `ns` the desired one: delete, create or replace. */
async function send(state: WriterState, ns: string): Promise<void> {
  const { client, stats } = state;
  const want = state.desired.get(ns);
  const have = state.seen.get(ns);
  if (!want) {
    await client.remove(ns);
    stats.deleted += 1;
  } else if (!have?.metadata.resourceVersion) {
    await client.create(want);
    stats.created += 1;
  } else {
    await client.replace(want, have.metadata.resourceVersion);
    stats.replaced += 1;
  }
}
