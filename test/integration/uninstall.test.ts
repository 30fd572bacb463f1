/**
 * A stopping agent tells an uninstall from a restart by its own DaemonSet, read with the agent's
 * rendered RBAC against a real API server: present is a restart (the program stays attached),
 * being deleted or gone is an uninstall (it is detached). What cannot be read keeps the program.
 */
import { AppsV1Api } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stopKind } from "../../runtime/agent/uninstall.ts";
import { createKubeClients } from "../../runtime/k8s/kube-client.ts";
import { type ControlPlane, startControlPlane } from "../cluster/control-plane.ts";
import { type Installed, installHive } from "../cluster/install.ts";

describe("an agent's stop: uninstall or restart, by its DaemonSet", () => {
  let cp: ControlPlane;
  let hive: Installed;
  /** The agent's own client, with its token. */
  let agent: ReturnType<typeof createKubeClients>["apps"];
  beforeAll(async () => {
    cp = await startControlPlane();
    hive = installHive(cp);
    agent = createKubeClients({ kubeConfig: cp.kubeConfig(await hive.agentToken("node-a")) }).apps;
  }, 120_000);
  afterAll(async () => {
    await cp?.stop();
  });
  const apps = () => cp.adminKubeConfig().makeApiClient(AppsV1Api);

  it("is a restart while the DaemonSet exists, and the agent's RBAC reads it", async () => {
    expect(await stopKind(agent, hive.namespace, "hive-agent")).toMatchObject({ uninstall: false });
    hive.assertNoRefusals();
  });

  it("is never an uninstall for a DaemonSet of the same name in a tenant's namespace, or another name", async () => {
    // The agent reads only its own namespace's DaemonSet, and RBAC gives it that one name only.
    const other = await stopKind(agent, hive.namespace, "kube-proxy");
    expect(other.uninstall).toBe(false);
    expect(other.why).toMatch(/403|forbidden/i);
    hive.expectRefusals({ resource: "daemonsets" });
  });

  it("keeps the program when there is no DaemonSet to ask, or the server does not answer", async () => {
    expect(await stopKind(agent, hive.namespace, undefined)).toMatchObject({ uninstall: false });
    const away = createKubeClients({ kubeConfig: cp.kubeConfig(undefined, "https://127.0.0.1:1") }).apps;
    expect(await stopKind(away, hive.namespace, "hive-agent", 2000)).toMatchObject({ uninstall: false });
  });

  it("is an uninstall while the DaemonSet is being deleted, and once it is gone", async () => {
    await apps().patchNamespacedDaemonSet({
      name: "hive-agent",
      namespace: hive.namespace,
      body: [{ op: "add", path: "/metadata/finalizers", value: ["hive.test/hold"] }],
    });
    await apps().deleteNamespacedDaemonSet({ name: "hive-agent", namespace: hive.namespace });
    expect(await stopKind(agent, hive.namespace, "hive-agent")).toMatchObject({
      uninstall: true,
      why: expect.stringMatching(/being deleted/),
    });
    await apps().patchNamespacedDaemonSet({
      name: "hive-agent",
      namespace: hive.namespace,
      body: [{ op: "remove", path: "/metadata/finalizers" }],
    });
    expect(await stopKind(agent, hive.namespace, "hive-agent")).toMatchObject({
      uninstall: true,
      why: expect.stringMatching(/gone/),
    });
  });
});
