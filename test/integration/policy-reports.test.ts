/**
 * PolicyReports on a real API server, with the PolicyReport CRD the monitor installs
 * (`reports: { installCrd: true }`), applied while an agent already runs: the elected pods role folds the agents' access Events into one
 * result per (policy, trap, pod) in the report of the pod's namespace, writes each report debounced,
 * and a new writer takes up the fails its predecessor wrote (who may write them: report-trust.test.ts).
 */
import { RbacAuthorizationV1Api, type V1ClusterRole } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import type { HiveData } from "../../api/data.ts";
import { ANNOTATION_REPORT_WRITER, reportApiVersion } from "../../api/report.ts";
import { clusterRules } from "../../component/builders/rbac.ts";
import type { ProcessIdentity } from "../../runtime/kernel/contract.ts";
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

// Installed without the PolicyReport CRD: the first test installs it while an agent runs.
const freshCluster = clusterPerTest();

describe("PolicyReports", () => {
  it("start once the cluster installs the report CRD (here OpenReports' Report), while the policy's status never waited for it", async () => {
    const c = await freshCluster();
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
    const c = await freshCluster();
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

  it("keep pass for a read by an allowed executable (the image's sshd), and fail for the same read by another", async () => {
    const c = await freshCluster();
    await ensureCrd(c);
    await c.createNamespace("team-f");
    const { node, close } = await startNode(c);
    const files = { "etc/shadow": "root:*:1::::::\n", "usr/sbin/sshd": "sshd\n" };
    await c.addPod("login", "node-1", { namespace: "team-f", files });
    await c.addPod("other", "node-1", { namespace: "team-f", files });
    await c.createPolicy("shadow", [{ path: "/etc/shadow", allow: [{ exe: "/usr/sbin/sshd" }] }]);
    // The image's sshd, as the kernel records it: its file, from the image, in the pod's root.
    const sshd = (data: HiveData): ProcessIdentity => {
      const exe = data.spec.executables?.[0];
      if (!exe) throw new Error(`no executables in ${data.metadata.name}: discover found no /usr/sbin/sshd`);
      const file = { major: exe.device.major, minor: exe.device.minor, ino: BigInt(exe["inode-no"]) };
      return {
        exe: { exe: "/usr/sbin/sshd", source: "exec" },
        provenance: {
          file,
          layer: "image",
          loaderEnv: [],
          envUnread: false,
          traced: false,
          forkUnseen: false,
        },
        chroot: false,
        rootDev: { major: file.major, minor: file.minor },
        execNs: 1n,
      };
    };
    await eventually(
      async () => (await c.data()).filter((d) => d.spec.executables?.length).length === 2,
      "both pods' HiveData name their sshd",
    );
    await readFileOf(c, node, "login", 5, sshd);
    // Read after the allowed ones, by a binary no entry allows: once it shows, the others were folded.
    await readFileOf(c, node, "other", 1);
    const report = await eventually(async () => {
      const r = await reportOf(c, "team-f");
      return resultOf(r, "other")?.result === "fail" && r;
    }, "the other pod fails");
    expect(resultOf(report, "login")?.result).toBe("pass");
    await close();
  });

  it("folds 10,000 reads into one result with their count, in a bounded number of report writes", async () => {
    const c = await freshCluster();
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
    const c = await freshCluster();
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
});
