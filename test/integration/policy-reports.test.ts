/**
 * PolicyReports on a real API server, with the PolicyReport CRD the monitor installs
 * (`reports: { installCrd: true }`), applied while an agent already runs: the elected pods role folds the agents' access Events into one
 * result per (policy, trap, pod) in the report of the pod's namespace, writes each report debounced,
 * and no tenant (nor a node for another) can write Hive's report or the Events it counts.
 */
import {
  ApiextensionsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  RbacAuthorizationV1Api,
  type V1ClusterRole,
  type V1CustomResourceDefinition,
} from "@kubernetes/client-node";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { policyReportCrd } from "../../api/crd.ts";
import {
  ANNOTATION_ACCESS,
  ANNOTATION_REPORT_WRITER,
  type PolicyReport,
  REPORT_NAME,
  type ReportFormat,
  reportApiVersion,
} from "../../api/report.ts";
import { clusterRules } from "../../component/builders/rbac.ts";
import { createAlertPipeline } from "../../runtime/alerts/pipeline.ts";
import { createPodEventRecorder } from "../../runtime/alerts/pod-events.ts";
import { createHiveMetrics } from "../../runtime/metrics/metrics.ts";
import { reportResource } from "../../runtime/reports/kube-report-client.ts";
import { captureLogger } from "../alerts/fixtures.ts";
import { Cluster, eventually, type HiveApi, type SimNode, startHiveApi } from "./harness.ts";

const KERNEL_A = "55555555-5555-4555-8555-555555555555";
const REPORTS = reportResource("policyreport");
/** Short enough for a test; the writes it allows are counted below. */
const DEBOUNCE_MS = 1000;

let hive: HiveApi | undefined;
beforeAll(async () => {
  // Installed without the PolicyReport CRD: the first test installs it while an agent runs.
  hive = await startHiveApi();
});

/** The report CRD the monitor installs (reports.installCrd), applied as an admin would. */
async function ensureCrd(c: Cluster, format: ReportFormat = "policyreport"): Promise<void> {
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
afterAll(async () => {
  await hive?.stop();
});
let cluster: Cluster | undefined;
afterEach(async () => {
  await cluster?.stop();
  cluster = undefined;
});

const reportOf = async (
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

const resultOf = (report: PolicyReport | undefined, pod: string, policy = "hive-system/shadow") =>
  report?.results?.find((r) => r.resources?.[0]?.name === pod && r.policy === policy);

/** node-1 runs every role, writes reports, and sends its alerts as pod Events as main.ts does. */
async function startNode(
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
async function readFileOf(c: Cluster, node: SimNode, pod: string, n = 1): Promise<void> {
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
      process: { exe: { exe: "/usr/bin/cat", source: "exec" }, execNs: 1n },
    });
    if (i % 500 === 499) await new Promise((r) => setImmediate(r));
  }
}

describe("PolicyReports", () => {
  it("start once the cluster installs the report CRD (here OpenReports' Report), while the policy's status never waited for it", async () => {
    cluster = await Cluster.start(hive as HiveApi);
    const c = cluster;
    await c.createNamespace("team-0");
    // The Role rule a monitor with reports: "openreports" renders (this file's install renders the default).
    const rbac = c.api.kubeConfig().makeApiClient(RbacAuthorizationV1Api);
    const rule = clusterRules("openreports").find((r) => r.apiGroups.includes("openreports.io"));
    await rbac.createClusterRole({
      body: { metadata: { name: "hive-agent-openreports" }, rules: [rule ?? {}] } as V1ClusterRole,
    });
    await rbac.createClusterRoleBinding({
      body: {
        metadata: { name: "hive-agent-openreports" },
        roleRef: {
          apiGroup: "rbac.authorization.k8s.io",
          kind: "ClusterRole",
          name: "hive-agent-openreports",
        },
        subjects: [{ kind: "ServiceAccount", name: "hive-agent", namespace: "hive-system" }],
      },
    });
    const { close } = await startNode(c, "openreports");
    await c.addPod("web", "node-1", { namespace: "team-0" });
    await c.createPolicy("shadow", [{ path: "/etc/shadow" }]);
    await eventually(
      async () => (await c.getPolicy("shadow"))?.status?.traps?.[0]?.inodesFound === 1,
      "the policy's status, without PolicyReports",
    );
    await ensureCrd(c, "openreports");
    const report = await eventually(async () => {
      const r = await reportOf(c, "team-0", "openreports");
      return resultOf(r, "web")?.result === "pass" && r;
    }, "the report written once the CRD is served");
    expect(report).toMatchObject({ apiVersion: reportApiVersion("openreports"), kind: "Report" });
    expect(await reportOf(c, "team-0")).toBeUndefined();
    await close();
    await rbac.deleteClusterRoleBinding({ name: "hive-agent-openreports" });
    await rbac.deleteClusterRole({ name: "hive-agent-openreports" });
  });

  it("show fail with the executable for a pod whose file was read, pass for its neighbour, and error for a missing file", async () => {
    cluster = await Cluster.start(hive as HiveApi);
    const c = cluster;
    await ensureCrd(c);
    await c.createNamespace("team-a");
    const { node, close } = await startNode(c);
    await c.addPod("web-1", "node-1", { namespace: "team-a" });
    await c.addPod("web-2", "node-1", { namespace: "team-a" });
    await c.createPolicy("shadow", [{ path: "/etc/shadow", severity: "critical" }]);
    await c.createPolicy("missing", [{ path: "/etc/no-such-file" }]);

    const before = await eventually(async () => {
      const r = await reportOf(c, "team-a");
      return r?.results?.filter((x) => x.policy === "hive-system/shadow").length === 2 &&
        r.results.some((x) => x.result === "error")
        ? r
        : undefined;
    }, "team-a's report: two passes and the missing file's errors");
    expect(resultOf(before, "web-1")).toMatchObject({
      result: "pass",
      rule: "/etc/shadow",
      severity: "critical",
      source: "hive",
      resources: [{ apiVersion: "v1", kind: "Pod", namespace: "team-a", name: "web-1" }],
    });
    const missing = before.results?.filter((r) => r.policy === "hive-system/missing") ?? [];
    expect(missing.map((r) => [r.resources?.[0]?.name, r.result]).sort()).toEqual([
      ["web-1", "error"],
      ["web-2", "error"],
    ]);
    expect(missing[0]?.message).toMatch(/FileNotFound/);
    expect(before.metadata.annotations?.[ANNOTATION_REPORT_WRITER]).toBe("node-1");

    await readFileOf(c, node, "web-1", 3);
    const after = await eventually(async () => {
      const r = await reportOf(c, "team-a");
      return resultOf(r, "web-1")?.result === "fail" && resultOf(r, "web-1")?.properties?.count === "3"
        ? r
        : undefined;
    }, "web-1 fails after three reads");
    const fail = resultOf(after, "web-1");
    expect(fail?.message).toMatch(/^read by \/usr\/bin\/cat, 3 times, last .*; alert [0-9a-f-]{36}$/);
    expect(fail?.properties).toMatchObject({ exe: "/usr/bin/cat", accesses: "read", count: "3" });
    expect(resultOf(after, "web-2")?.result).toBe("pass");
    expect(after.summary).toMatchObject({ fail: 1, pass: 1, error: 2 });
    await close();

    // Deleting a policy removes its results; with none left, the report goes.
    await c.deletePolicy("missing");
    await eventually(
      async () => !(await reportOf(c, "team-a"))?.results?.some((r) => r.policy === "hive-system/missing"),
      "the deleted policy's results gone",
    );
    await c.deletePolicy("shadow");
    await eventually(async () => (await reportOf(c, "team-a")) === undefined, "the empty report deleted");
  });

  it("folds 10,000 reads into one result with their count, in a bounded number of report writes", async () => {
    cluster = await Cluster.start(hive as HiveApi);
    const c = cluster;
    await ensureCrd(c);
    await c.createNamespace("team-b");
    const { node, close } = await startNode(c);
    await c.addPod("busy", "node-1", { namespace: "team-b" });
    await c.createPolicy("shadow", [{ path: "/etc/shadow" }]);
    await eventually(
      async () => resultOf(await reportOf(c, "team-b"), "busy")?.result === "pass",
      "busy passes",
    );
    const started = Date.now();
    const writes = () =>
      c.api.requests.filter((r) => r.resource === REPORTS.plural && ["create", "update"].includes(r.verb))
        .length;
    const writesBefore = writes();

    await readFileOf(c, node, "busy", 10_000);
    const report = await eventually(
      async () => {
        const r = await reportOf(c, "team-b");
        return resultOf(r, "busy")?.properties?.count === "10000" ? r : undefined;
      },
      "one result counting 10,000 reads",
      120_000,
    );
    expect(report.results).toHaveLength(1);
    const seconds = (Date.now() - started) / 1000;
    // At most one write per debounce, and one more for the change that started it.
    expect(writes() - writesBefore).toBeLessThanOrEqual(Math.ceil(seconds / (DEBOUNCE_MS / 1000)) + 1);
    expect(writes() - writesBefore).toBeGreaterThanOrEqual(1);
    await close();
  });

  it("keeps a fail across a change of writer: taken up from the report, an Event both writers saw counted once", async () => {
    cluster = await Cluster.start(hive as HiveApi);
    const c = cluster;
    await ensureCrd(c);
    await c.createNamespace("team-d");
    const { node, close } = await startNode(c);
    await c.addPod("web-1", "node-1", { namespace: "team-d" });
    await c.addPod("web-2", "node-1", { namespace: "team-d" });
    await c.createPolicy("shadow", [{ path: "/etc/shadow" }]);
    await readFileOf(c, node, "web-1", 3);
    await readFileOf(c, node, "web-2", 2);
    const counts = async () => {
      const r = await reportOf(c, "team-d");
      return [resultOf(r, "web-1"), resultOf(r, "web-2")].map((x) => `${x?.result}:${x?.properties?.count}`);
    };
    await eventually(async () => (await counts()).join() === "fail:3,fail:2", "both pods fail");
    await close();
    // web-1's Event expires (the API server's TTL); web-2's lives on into the next writer's list.
    const events = await c.admin.core.listNamespacedEvent({ namespace: "team-d", labelSelector: "trap-id" });
    const expired = events.items.find((e) => e.involvedObject.name === "web-1");
    await c.admin.core.deleteNamespacedEvent({ namespace: "team-d", name: expired?.metadata?.name ?? "" });

    const next = await c.addNode("node-2", "66666666-6666-4666-8666-666666666666", {
      agentPod: "ready",
      reports: { format: "policyreport", debounceMs: DEBOUNCE_MS },
    });
    await node.agent.stop();
    await eventually(() => next.agent.pods() !== undefined, "node-2 holds the pods role");
    // A change makes the new writer write: a third pod.
    await c.addPod("web-3", "node-2", { namespace: "team-d" });
    await eventually(
      async () => resultOf(await reportOf(c, "team-d"), "web-3")?.result === "pass",
      "node-2 writes the report",
    );
    const report = await reportOf(c, "team-d");
    expect(report?.metadata.annotations?.[ANNOTATION_REPORT_WRITER]).toBe("node-2");
    expect(await counts()).toEqual(["fail:3", "fail:2"]);
  });

  it("refuses a tenant, even with a wildcard role, writing Hive's report or the access Events it counts, and a node naming another", async () => {
    cluster = await Cluster.start(hive as HiveApi);
    const c = cluster;
    await ensureCrd(c);
    await c.createNamespace("team-c");
    const rbac = c.api.kubeConfig().makeApiClient(RbacAuthorizationV1Api);
    await rbac.createNamespacedRoleBinding({
      namespace: "team-c",
      body: {
        metadata: { name: "trudy-admin" },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "cluster-admin" },
        subjects: [{ kind: "User", name: "trudy", apiGroup: "rbac.authorization.k8s.io" }],
      },
    });
    const forged: PolicyReport = {
      apiVersion: reportApiVersion("policyreport"),
      kind: "PolicyReport",
      metadata: {
        name: REPORT_NAME,
        namespace: "team-c",
        annotations: { [ANNOTATION_REPORT_WRITER]: "node-1" },
      },
      summary: { pass: 1 },
      results: [{ policy: "hive-system/shadow", rule: "/etc/shadow", result: "pass" }],
    };
    const trudy = c.api.kubeConfig("trudy");
    const refused = async (p: Promise<unknown>) => {
      const err = (await p.then(
        () => undefined,
        (e: unknown) => e,
      )) as { code?: number; body?: string } | undefined;
      expect(err?.code).toBe(403);
      return String(err?.body ?? "");
    };
    expect(
      await refused(
        trudy.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
          ...REPORTS,
          namespace: "team-c",
          body: forged,
        }),
      ),
    ).toContain("only the Hive agent may create, change or delete the PolicyReport");
    // A fake access to make another team's pod fail, as a tenant.
    const event = {
      metadata: {
        name: "web.hive-forged",
        namespace: "team-c",
        labels: { "app.kubernetes.io/managed-by": "hive", "trap-id": "0123456789abcdef" },
        annotations: { [ANNOTATION_ACCESS]: JSON.stringify({ policy: "hive-system/shadow" }) },
      },
      involvedObject: { kind: "Pod", name: "web", namespace: "team-c" },
      reason: "FileAccessed",
      reportingInstance: "node-1",
    };
    expect(
      await refused(
        trudy.makeApiClient(CoreV1Api).createNamespacedEvent({ namespace: "team-c", body: event }),
      ),
    ).toContain("only the Hive agent may write an Event labelled trap-id");
    // The agent's own token on node-2, naming node-1 as the writer.
    c.expectRefusals({ node: "node-2", resource: REPORTS.plural });
    c.expectRefusals({ node: "node-2", resource: "events" });
    const node2 = await c.agentKubeConfig("node-2");
    await refused(
      node2.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
        ...REPORTS,
        namespace: "team-c",
        body: forged,
      }),
    );
    await refused(node2.makeApiClient(CoreV1Api).createNamespacedEvent({ namespace: "team-c", body: event }));
    expect(await reportOf(c, "team-c")).toBeUndefined();
  });
});
