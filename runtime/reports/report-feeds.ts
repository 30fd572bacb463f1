/**
 * The PolicyReports' own watches (the agents' access Events and Hive's reports), started once the
 * API server serves PolicyReports: checked when the pods role starts and then every `recheckMs`
 * until it does, so a cluster that installs the CRD later (Kyverno, Policy Reporter, the monitor's
 * `reports.installCrd`) gets its reports without an agent restart. They are not the role's
 * informers: the HivePolicy status never waits for a CRD that may never come.
 */
import { REPORT_FORMATS, reportApiVersion } from "../../api/report.ts";
import { accessEventFeed, type FeedOptions, reportFeed } from "../controllers/feeds.ts";
import { createReportClient, reportsServed } from "./kube-report-client.ts";
import { createPolicyReports, type PolicyReports, type PolicyReportsOptions } from "./policy-reports.ts";

export interface ReportFeedsOptions extends Omit<PolicyReportsOptions, "client" | "placement" | "onFolded"> {
  feedOptions: FeedOptions;
  /** Called when an input changed or the reports became ready: the pods role recomputes. */
  onInput: () => void;
  /** How often an absent CRD is looked for again (default 60 s). */
  recheckMs?: number;
}

export interface ReportFeeds {
  readonly reports: PolicyReports;
  stop(): Promise<void>;
}

export function startReportFeeds(options: ReportFeedsOptions): ReportFeeds {
  const { feedOptions, onInput, log } = options;
  const { clients } = feedOptions;
  const reports = createPolicyReports({
    ...options,
    client: createReportClient(clients.custom, options.format),
    placement: async (namespace, name) => {
      // A list by name: the agent may list pods (discover), and needs no get.
      const pods = await clients.core.listNamespacedPod({
        namespace,
        fieldSelector: `metadata.name=${name}`,
      });
      const pod = pods.items[0];
      const node = pod?.spec?.nodeName;
      return node ? { node, ...(pod.metadata?.uid ? { uid: pod.metadata.uid } : {}) } : undefined;
    },
    onFolded: onInput,
  });
  const recheckMs = options.recheckMs ?? 60_000;
  let informers: { start(): Promise<void>; stop(): Promise<void> }[] = [];
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  let warned = false;

  async function served(): Promise<boolean> {
    try {
      return await reportsServed(clients.custom, options.format);
    } catch (error) {
      log.warn("cannot tell whether PolicyReports are served; asked again later", { error, recheckMs });
      return false;
    }
  }

  async function check(): Promise<void> {
    if (stopped) return;
    if (!(await served())) {
      if (!warned)
        log.warn(
          `no ${REPORT_FORMATS[options.format].kind} CRD (${reportApiVersion(options.format)}) on the API server: no reports until one is installed (the monitor's reports.installCrd: true, Kyverno or Policy Reporter)`,
          { recheckMs },
        );
      warned = true;
      if (!stopped) timer = setTimeout(() => void check(), recheckMs);
      return;
    }
    if (stopped) return;
    informers = [
      accessEventFeed((t, ev) => {
        reports.onAccessEvent(t, ev);
        onInput();
      }, feedOptions),
      reportFeed(
        options.format,
        (t, r) => {
          reports.onReport(t, r);
          onInput();
        },
        feedOptions,
      ),
    ];
    await Promise.all(informers.map((i) => i.start()));
    if (stopped) return;
    reports.markSynced();
    log.info("writing PolicyReports", { debounceMs: options.debounceMs, failWindowMs: options.failWindowMs });
    onInput();
  }

  void check().catch((error: unknown) => log.error("PolicyReports did not start", { error }));
  return {
    reports,
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      reports.stop();
      await Promise.all(informers.map((i) => i.stop()));
    },
  };
}
