/**
 * The PolicyReport tests' shared steps (policy-reports.test.ts, report-trust.test.ts): the CRD an
 * admin installs, the reports as an admin reads them, and node-1 as main.ts wires it (every role,
 * the report writer, its alerts sent as pod Events).
 */
import { ApiextensionsV1Api, CoreV1Api, type V1CustomResourceDefinition } from "@kubernetes/client-node";
import { policyReportCrd } from "../../api/crd.ts";
import type { HiveData } from "../../api/data.ts";
import { type PolicyReport, REPORT_NAME, type ReportFormat } from "../../api/report.ts";
import { createAlertPipeline } from "../../runtime/alerts/pipeline.ts";
import { createPodEventRecorder } from "../../runtime/alerts/pod-events.ts";
import type { ProcessIdentity } from "../../runtime/kernel/contract.ts";
import { createHiveMetrics } from "../../runtime/metrics/metrics.ts";
import { reportResource } from "../../runtime/reports/kube-report-client.ts";
import { captureLogger } from "../alerts/fixtures.ts";
import type { Cluster, SimNode } from "./harness.ts";
import { eventually } from "./harness.ts";

export const KERNEL_A = "55555555-5555-4555-8555-555555555555";
export const REPORTS = reportResource("policyreport");
/** Short enough for a test; the writes it allows are counted. */
export const DEBOUNCE_MS = 1000;

/** The report CRD the monitor installs (reports.installCrd), applied as an admin would. */
export async function ensureCrd(c: Cluster, format: ReportFormat = "policyreport"): Promise<void> {
  const ext = c.api.kubeConfig().makeApiClient(ApiextensionsV1Api);
  await ext
    .createCustomResourceDefinition({
      body: policyReportCrd(format) as unknown as V1CustomResourceDefinition,
    })
    .catch((error: unknown) => {
      if ((error as { code?: number }).code !== 409) throw error;
    });
  // A CRD just Established may still answer 404/429 for a moment.
  await eventually(
    () => c.admin.custom.listClusterCustomObject({ ...reportResource(format), limit: 1 }).then(() => true),
    `${format} reports served`,
    30_000,
  );
}
export const reportOf = async (
  c: Cluster,
  namespace: string,
  format: ReportFormat = "policyreport",
): Promise<PolicyReport | undefined> =>
  (await c.admin.custom
    .getNamespacedCustomObject({ ...reportResource(format), namespace, name: REPORT_NAME })
    .catch((error: unknown) => {
      if ((error as { code?: number }).code === 404) return undefined;
      throw error;
    })) as PolicyReport | undefined;

export const resultOf = (report: PolicyReport | undefined, pod: string, policy = "hive-system/shadow") =>
  report?.results?.find((r) => r.resources?.[0]?.name === pod && r.policy === policy);

/** node-1 runs every role, writes reports, and sends its alerts as pod Events as main.ts does. */
export async function startNode(
  c: Cluster,
  format: ReportFormat = "policyreport",
): Promise<{ node: SimNode; close: () => Promise<void> }> {
  const core = (await c.agentKubeConfig("node-1")).makeApiClient(CoreV1Api);
  const logger = captureLogger().logger;
  const podEvents = createPodEventRecorder({ core, nodeName: "node-1", logger, flushIntervalMs: 200 });
  const alerts = await createAlertPipeline({
    logger,
    metrics: createHiveMetrics({ processMetrics: false }),
    lines: () => {},
    rateLimit: false,
    podEvents,
  });
  const node = await c.addNode("node-1", KERNEL_A, {
    alerts,
    agentPod: "ready",
    reports: { format, debounceMs: DEBOUNCE_MS, recheckMs: 500 },
  });
  return { node, close: () => alerts.close() };
}

/** Emits `n` reads of the trapped file of `pod` in node-1's kernel. */
export async function readFileOf(
  c: Cluster,
  node: SimNode,
  pod: string,
  n = 1,
  /** The reading process as the kernel records it (default: /usr/bin/cat, no allow entry holds). */
  reader: (data: HiveData) => ProcessIdentity = () => ({
    exe: { exe: "/usr/bin/cat", source: "exec" },
    execNs: 1n,
  }),
): Promise<void> {
  const data = await eventually(
    async () => (await c.data()).find((d) => d.metadata.annotations?.pod_name === pod),
    `${pod}'s HiveData`,
  );
  const kernel = await eventually(() => {
    const k = node.activeKernel();
    const ino = String(data.spec["inode-no"]);
    const entry = k?.entries.find((e) => e.kind === "file" && String(e.key.ino) === ino);
    return entry && k ? { k, entry } : undefined;
  }, `${pod}'s file in the kernel map`);
  for (let i = 0; i < n; i++) {
    kernel.k.emit({
      slot: kernel.entry.slot,
      kind: "file",
      key: kernel.entry.key,
      process: reader(data),
    });
    if (i % 500 === 499) await new Promise((r) => setImmediate(r));
  }
}
