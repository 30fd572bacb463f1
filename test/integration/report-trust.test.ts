/**
 * Who may make Hive's PolicyReports say something, on a real API server with the monitor's
 * admission: no tenant (even with a wildcard role) writes Hive's report or the access Events it
 * counts; a node writes them only naming itself; and a node's access Event counts only for a pod
 * that node runs, so a compromised node cannot make other nodes' pods fail.
 */
import { CoreV1Api, CustomObjectsApi, RbacAuthorizationV1Api } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { LABEL_TRAP_ID } from "../../api/meta.ts";
import {
  ANNOTATION_ACCESS,
  ANNOTATION_REPORT_WRITER,
  type PolicyReport,
  REPORT_NAME,
  reportApiVersion,
} from "../../api/report.ts";
import { clusterPerTest } from "./cluster-per-test.ts";
import { eventually } from "./harness.ts";
import {
  DEBOUNCE_MS,
  ensureCrd,
  REPORTS,
  readFileOf,
  reportOf,
  resultOf,
  startNode,
} from "./report-fixtures.ts";

const freshCluster = clusterPerTest();

describe("PolicyReports' trust", () => {
  it("refuses a tenant, even with a wildcard role, writing Hive's report or the access Events it counts, and a node naming another", async () => {
    const c = await freshCluster();
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

  it("count a node's access Event only for a pod that node runs: a compromised node cannot make another node's pod fail", async () => {
    const c = await freshCluster();
    await ensureCrd(c);
    await c.createNamespace("team-e");
    const { node, close } = await startNode(c);
    await c.addPod("web", "node-1", { namespace: "team-e" });
    await c.addPod("local", "node-2", { namespace: "team-e" });
    await c.createPolicy("shadow", [{ path: "/etc/shadow" }]);
    const data = await eventually(
      async () => (await c.data()).find((d) => d.metadata.annotations?.pod_name === "web"),
      "web's HiveData",
    );
    const trapId = data.metadata.labels?.[LABEL_TRAP_ID] ?? "";
    // node-2's own agent token, as a compromised node would use it: admission lets it write access
    // Events naming itself, for any pod.
    const node2 = (await c.agentKubeConfig("node-2")).makeApiClient(CoreV1Api);
    const access = (pod: string, count: number) => ({
      metadata: {
        name: `${pod}.hive-from-node-2`,
        namespace: "team-e",
        labels: { "app.kubernetes.io/managed-by": "hive", [LABEL_TRAP_ID]: trapId },
        annotations: {
          [ANNOTATION_ACCESS]: JSON.stringify({
            policy: "hive-system/shadow",
            accesses: "read",
            exe: "/usr/bin/cat",
            parentExe: "/bin/sh",
            alertId: "00000000-0000-4000-8000-000000000000",
            container: "app",
          }),
        },
      },
      involvedObject: { apiVersion: "v1", kind: "Pod", name: pod, namespace: "team-e" },
      reason: "FileAccessed",
      message: "read",
      type: "Warning",
      count,
      lastTimestamp: new Date(),
      reportingComponent: "hive-agent",
      reportingInstance: "node-2",
    });
    await node2.createNamespacedEvent({ namespace: "team-e", body: access("web", 50) as never });
    // The same node's access for its own pod counts: the writer read both.
    await node2.createNamespacedEvent({ namespace: "team-e", body: access("local", 2) as never });
    await eventually(
      async () => resultOf(await reportOf(c, "team-e"), "local")?.result === "fail",
      "node-2's own pod fails",
    );
    await new Promise((r) => setTimeout(r, 3 * DEBOUNCE_MS));
    expect(resultOf(await reportOf(c, "team-e"), "web")?.result).toBe("pass");
    expect(resultOf(await reportOf(c, "team-e"), "local")?.properties?.count).toBe("2");
    // node-1's own read of web's file still fails it.
    await readFileOf(c, node, "web", 1);
    await eventually(async () => {
      const web = resultOf(await reportOf(c, "team-e"), "web");
      return web?.result === "fail" && web.properties?.count === "1";
    }, "web fails from node-1's read only");
    await close();
  });
});
