/**
 * PolicyReport (`wgpolicyk8s.io/v1alpha2`), the format `kubectl get policyreport -A`, Policy
 * Reporter and most cluster dashboards read, and its successor OpenReports' Report
 * (`openreports.io/v1alpha1`), whose results are the same: the part of them Hive writes. One report
 * per namespace with selected pods, one result per (HivePolicy, trap, pod). The published CRDs
 * (Kyverno's module carries the first, openreports/reports-api the second) are the authority:
 * test/contract/policy-report-crd.test.ts checks this schema and the CRDs derived from it.
 */
import { type Static, Type } from "@sinclair/typebox";
import { GROUP } from "./meta.ts";
import type { Severity } from "./policy.ts";

/** The report kinds Hive can write, by the name `reports` gives them. */
export const REPORT_FORMATS = {
  policyreport: {
    group: "wgpolicyk8s.io",
    version: "v1alpha2",
    kind: "PolicyReport",
    plural: "policyreports",
    singular: "policyreport",
    shortNames: ["polr"],
  },
  openreports: {
    group: "openreports.io",
    version: "v1alpha1",
    kind: "Report",
    plural: "reports",
    singular: "report",
    shortNames: ["reps"],
  },
} as const;
export type ReportFormat = keyof typeof REPORT_FORMATS;
export const REPORT_FORMAT_NAMES = Object.keys(REPORT_FORMATS) as ReportFormat[];
export const DEFAULT_REPORT_FORMAT: ReportFormat = "policyreport";
export const reportApiVersion = (format: ReportFormat): string =>
  `${REPORT_FORMATS[format].group}/${REPORT_FORMATS[format].version}`;

/** Hive's report in each namespace: this name is Hive's alone (admission keeps it so). */
export const REPORT_NAME = "hive-file-access";
/** `source` of every result Hive writes. */
export const REPORT_SOURCE = "hive";
/** The node of the agent that wrote the report; admission binds it to the writer's node claim. */
export const ANNOTATION_REPORT_WRITER = `${GROUP}/written-by-node`;
/** Results left out of the report by the cap (their counts are still in `summary`). */
export const ANNOTATION_RESULTS_OMITTED = `${GROUP}/results-omitted`;

/**
 * On the agent's per-access Event (runtime/alerts/pod-events.ts, which labels it `trap-id`): the
 * latest alert of the group as JSON `AccessNote`, which the report writer folds into a `fail`.
 */
export const ANNOTATION_ACCESS = `${GROUP}/access`;
export interface AccessNote {
  /** The HivePolicy as namespace/name. */
  policy: string;
  accesses: string;
  exe: string;
  parentExe: string;
  alertId: string;
  container: string;
}

/** The most results one report holds: fails and errors first, then skips, then passes. */
export const MAX_REPORT_RESULTS = 500;
/** How long a result stays `fail` after the last unexpected access, unless the monitor says otherwise. */
export const DEFAULT_FAIL_WINDOW_SECONDS = 7 * 24 * 3600;

export const RESULTS = ["pass", "fail", "warn", "error", "skip"] as const;
export type ResultKind = (typeof RESULTS)[number];
export const REPORT_SEVERITIES = ["critical", "high", "medium", "low", "info"] as const;
export type ReportSeverity = (typeof REPORT_SEVERITIES)[number];

/**
 * A trap's severity on the report's scale: Alertmanager's three levels land on the ends and the
 * middle of the five (`warning`, the default, is `medium`: worth a look, not a page).
 */
export const REPORT_SEVERITY: Record<Severity, ReportSeverity> = {
  info: "info",
  warning: "medium",
  critical: "critical",
};

const ObjectReferenceSchema = Type.Object({
  apiVersion: Type.Optional(Type.String()),
  kind: Type.Optional(Type.String()),
  name: Type.Optional(Type.String()),
  namespace: Type.Optional(Type.String()),
  uid: Type.Optional(Type.String()),
});

export const ReportResultSchema = Type.Object({
  policy: Type.String({ description: "The HivePolicy, as namespace/name." }),
  rule: Type.Optional(Type.String({ description: "The trap's path." })),
  // Optional as published (Hive always writes it).
  result: Type.Optional(
    Type.Union(
      RESULTS.map((r) => Type.Literal(r)),
      {
        description:
          "fail: an unexpected access within the window; error: the trap cannot be armed; skip: no ready agent on the pod's node; pass: armed, nothing unexpected.",
      },
    ),
  ),
  severity: Type.Optional(Type.Union(REPORT_SEVERITIES.map((s) => Type.Literal(s)))),
  source: Type.Optional(Type.String()),
  category: Type.Optional(Type.String()),
  message: Type.Optional(Type.String()),
  scored: Type.Optional(Type.Boolean()),
  timestamp: Type.Optional(Type.Object({ seconds: Type.Integer(), nanos: Type.Integer() })),
  resources: Type.Optional(Type.Array(ObjectReferenceSchema)),
  properties: Type.Optional(Type.Record(Type.String(), Type.String())),
});
export type ReportResult = Static<typeof ReportResultSchema>;

export const ReportSummarySchema = Type.Object({
  pass: Type.Optional(Type.Integer()),
  fail: Type.Optional(Type.Integer()),
  warn: Type.Optional(Type.Integer()),
  error: Type.Optional(Type.Integer()),
  skip: Type.Optional(Type.Integer()),
});
export type ReportSummary = Static<typeof ReportSummarySchema>;

export const PolicyReportSchema = Type.Object({
  apiVersion: Type.String(),
  kind: Type.String(),
  metadata: Type.Object({
    name: Type.String(),
    namespace: Type.String(),
    labels: Type.Optional(Type.Record(Type.String(), Type.String())),
    annotations: Type.Optional(Type.Record(Type.String(), Type.String())),
    resourceVersion: Type.Optional(Type.String()),
  }),
  summary: Type.Optional(ReportSummarySchema),
  results: Type.Optional(Type.Array(ReportResultSchema)),
});
export type PolicyReport = Static<typeof PolicyReportSchema>;

/** The properties of a `fail` result, which are also what a new writer reads back to go on. */
export const FAIL_PROPERTIES = [
  "trapId",
  "count",
  "lastAccess",
  "accesses",
  "exe",
  "parentExe",
  "alertId",
  "container",
  "events",
] as const;
