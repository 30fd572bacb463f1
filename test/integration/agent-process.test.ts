/**
 * `hive agent` as a process: started with flags, ready on /readyz, and on SIGTERM it stops
 * its roles, releases its Lease and exits 0. It authenticates to a real kube-apiserver with a
 * token bound to its Pod on its Node, under the RBAC and admission policies the component renders.
 */
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CoordinationV1Api } from "@kubernetes/client-node";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Cluster, eventually, type HiveApi, spawnAgentProcess, startHiveApi } from "./harness.ts";

let hive: HiveApi | undefined;
beforeAll(async () => {
  hive = await startHiveApi();
});
afterAll(async () => {
  await hive?.stop();
});
let cluster: Cluster | undefined;
let child: ChildProcess | undefined;
const spoolDir = mkdtempSync(join(tmpdir(), "hive-agent-process-"));
afterEach(async () => {
  if (child && child.exitCode === null) child.kill("SIGKILL");
  rmSync(spoolDir, { recursive: true, force: true });
  // Fails the test when the server refused a request of the agent it did not declare.
  await cluster?.stop();
  cluster = undefined;
});

describe("the agent process", () => {
  it("becomes ready, and on SIGTERM releases its Lease and exits 0", async () => {
    cluster = await Cluster.start(hive as HiveApi);
    let stderr = "";
    child = await spawnAgentProcess(
      hive as HiveApi,
      { node: "node-p", pod: "agent-p" },
      ["--runtime-socket", "/nonexistent.sock", "--spool-dir", spoolDir],
      { dir: spoolDir },
    );
    child.stderr?.on("data", (b: Buffer) => {
      stderr += b.toString();
    });
    const url = await eventually(() => /"metrics":"(http:[^"]+)"/.exec(stderr)?.[1], "agent started", 15_000);
    await eventually(async () => (await fetch(`${url}/readyz`)).status === 200, "ready");
    // Readiness includes the alert spool (it fails while the spool directory cannot be written).
    expect(await (await fetch(`${url}/readyz?verbose`)).text()).toContain("[+]alert-spool ok");
    const coordination = cluster.api.kubeConfig().makeApiClient(CoordinationV1Api);
    await eventually(async () => {
      const l = await coordination.readNamespacedLease({ name: "hive-pods", namespace: "hive-system" });
      return l.spec?.holderIdentity === "node-p/agent-p";
    }, "pods Lease held");
    const exited = new Promise<number | null>((resolve) => child?.once("exit", (code) => resolve(code)));
    child.kill("SIGTERM");
    expect(await exited).toBe(0);
    const lease = await coordination.readNamespacedLease({ name: "hive-pods", namespace: "hive-system" });
    expect(lease.spec?.holderIdentity ?? "").toBe("");
    expect(stderr).toContain('"msg":"agent stopped"');
  });
});
