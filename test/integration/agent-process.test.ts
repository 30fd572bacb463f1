/**
 * `hive agent` as a process: started with flags, ready on /readyz, and on SIGTERM it stops
 * its roles, releases its Lease and exits 0.
 */
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CoordinationV1Api } from "@kubernetes/client-node";
import { afterEach, describe, expect, it } from "vitest";
import { hiveCrds } from "../../api/crd.ts";
import { installHive } from "../apiserver/install.ts";
import { type ApiServer, startApiServer } from "../apiserver/server.ts";
import { eventually, spawnAgentProcess } from "./harness.ts";

let api: ApiServer | undefined;
let child: ChildProcess | undefined;
const spoolDir = mkdtempSync(join(tmpdir(), "hive-agent-process-"));
afterEach(async () => {
  if (child && child.exitCode === null) child.kill("SIGKILL");
  await api?.stop();
  rmSync(spoolDir, { recursive: true, force: true });
  refusalCheck?.();
  refusalCheck = undefined;
});
let refusalCheck: (() => void) | undefined;

describe("the agent process", () => {
  it("becomes ready, and on SIGTERM releases its Lease and exits 0", async () => {
    api = await startApiServer({ crds: hiveCrds() });
    const installed = installHive(api, { image: "hive:test", namespace: "hive-system" });
    refusalCheck = () => installed.assertNoRefusals();
    let stderr = "";
    child = spawnAgentProcess(api, { node: "node-p", pod: "agent-p" }, [
      "--runtime-socket",
      "/nonexistent.sock",
      "--spool-dir",
      spoolDir,
    ]);
    child.stderr?.on("data", (b: Buffer) => {
      stderr += b.toString();
    });
    const url = await eventually(() => /"metrics":"(http:[^"]+)"/.exec(stderr)?.[1], "agent started", 15_000);
    await eventually(async () => (await fetch(`${url}/readyz`)).status === 200, "ready");
    // Readiness includes the alert spool (it fails while the spool directory cannot be written).
    expect(await (await fetch(`${url}/readyz?verbose`)).text()).toContain("[+]alert-spool ok");
    const coordination = api.kubeConfig().makeApiClient(CoordinationV1Api);
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
