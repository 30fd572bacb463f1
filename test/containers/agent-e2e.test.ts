/**
 * The agent as `hive agent` runs it (runAgent: flags, clients, runtime socket, elections,
 * metrics server, shutdown) against a real kube-apiserver, with real containers from a
 * private containerd. The kernel boundary is the one replaced part (this machine's kernel
 * cannot attach kprobes; the libbpf loader is exercised in the QEMU kernel suite).
 */
import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import { CoordinationV1Api, type CoreV1Api, type CustomObjectsApi } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { HiveData } from "../../api/data.ts";
import { API_VERSION, GROUP, PLURAL_DATA, PLURAL_POLICY, VERSION } from "../../api/meta.ts";
import { fileKeyFromStat } from "../../runtime/kernel/layout.ts";
import { readWatchTableFile } from "../../runtime/standalone/watch-table-file.ts";
import { setPodRunning } from "../cluster/testing.ts";
import { eventually } from "../integration/harness.ts";
import { type AgentWithContainers, startAgentWithContainers } from "./agent-harness.ts";
import { containerSuiteGate } from "./containerd-harness.ts";

const enabled = containerSuiteGate();
const KERNEL = "cccccccc-3333-4333-8333-333333333333";
const NODE = "node-e2e";

describe.skipIf(!enabled)("hive agent end to end with real containers", () => {
  let agent: AgentWithContainers;
  let core: CoreV1Api;
  let custom: CustomObjectsApi;

  beforeAll(async () => {
    agent = await startAgentWithContainers({ nodeName: NODE, kernelId: KERNEL });
    ({ core, custom } = agent);
  });

  afterAll(async () => {
    await agent?.close();
  });

  it("discovers a real container's file, follows a rename inside it, and cleans up after the pod", async () => {
    const rootfs = agent.cd.makeRootfs("web", { "etc/shadow": "root:*:1::::::\n" });
    await agent.cd.start("e2e-web", rootfs);
    const pod = await core.createNamespacedPod({
      namespace: "default",
      body: {
        metadata: { name: "web", labels: { security: "high" } },
        spec: { nodeName: NODE, containers: [{ name: "app", image: "busybox" }] },
      },
    });
    await setPodRunning(core, "default", "web", {
      podIP: "10.2.0.1",
      containerIds: { app: "containerd://e2e-web" },
    });
    await custom.createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: "hive-system",
      plural: PLURAL_POLICY,
      body: {
        apiVersion: API_VERSION,
        kind: "HivePolicy",
        metadata: { name: "shadow" },
        spec: { traps: [{ path: "/etc/shadow", match: { matchLabels: { security: "high" } } }] },
      },
    });
    const list = async () =>
      (
        (await custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: PLURAL_DATA })) as {
          items: HiveData[];
        }
      ).items;
    const [data] = await eventually(async () => {
      const items = await list();
      return items.length === 1 ? items : undefined;
    }, "HiveData for the real container");
    const file = fileKeyFromStat(statSync(join(rootfs, "etc/shadow"), { bigint: true }));
    expect(BigInt(data?.spec["inode-no"] ?? 0)).toBe(file.ino);
    expect(data?.spec.device).toEqual({ major: file.major, minor: file.minor });
    // Ready once the file found at start is in the kernel's map (traps-armed), a sync after its HiveData.
    const readyz = await eventually(async () => {
      const r = await fetch(`${agent.metricsUrl}/readyz?verbose`);
      return r.status === 200 ? r : undefined;
    }, "the agent ready");
    // The alert spool is one of the readiness checks (it fails while the spool cannot be written).
    expect(await readyz.text()).toContain("[+]alert-spool ok");

    const kernel = await eventually(() => {
      const k = agent.kernels.at(-1);
      return k?.entries.some((e) => e.kind === "file" && e.key.ino === file.ino) ? k : undefined;
    }, "kernel map has the file");

    // An access: the alert reaches the callback, enriched from the HiveData alone.
    const slot = kernel.entries.find((e) => e.kind === "file")?.slot ?? -1;
    kernel.emit({
      slot,
      kind: "file",
      key: file,
      accesses: ["read"],
      pid: process.pid,
      tgid: process.pid,
      comm: "cat",
    });
    const alert = await eventually(() => agent.received[0], "alert delivered to the callback");
    // The same access as a Kubernetes Event on the accessed pod (what `kubectl describe pod` shows).
    const podEvent = await eventually(async () => {
      const events = await core.listNamespacedEvent({
        namespace: "default",
        fieldSelector: "involvedObject.name=web,reason=FileAccessed",
      });
      return events.items[0];
    }, "Kubernetes Event on the pod");
    expect(podEvent.involvedObject).toMatchObject({ kind: "Pod", name: "web", uid: pod.metadata?.uid });
    expect(podEvent.message).toContain("file /etc/shadow read by cat");
    expect(podEvent.message).toContain(`pid ${process.pid}`);
    expect(podEvent.count).toBe(1);
    expect(podEvent.source?.host).toBe(NODE);

    // `hive status` names the agent's slots from the watch table the loader writes beside the pins.
    const table = await eventually(async () => {
      const t = await readWatchTableFile(agent.tableFile);
      return t?.slots.some((r) => r.slot === slot) ? t : undefined;
    }, "watch table written");
    expect(table).toMatchObject({ writer: "agent", kernelId: KERNEL, pid: process.pid });
    const record = table.slots.find((r) => r.slot === slot);
    expect(record).toMatchObject({ kind: "file", inode: file.ino.toString() });
    expect(record?.traps).toEqual([
      expect.objectContaining({
        policy: "shadow",
        namespace: "hive-system",
        path: "/etc/shadow",
        target: "default/web app (e2e-web)",
      }),
    ]);
    // Every controller's passes are timed (the pods controller debounces for half a second).
    await eventually(async () => {
      const text = await (await fetch(`${agent.metricsUrl}/metrics`)).text();
      return ["discover", "loader", "pods"].every((controller) =>
        new RegExp(`hive_reconcile_duration_seconds_count\\{controller="${controller}"\\} [1-9]`).test(text),
      );
    }, "reconcile durations of the three controllers");
    expect(alert).toMatchObject({
      hive_policy_name: "shadow",
      hive_policy_namespace: "hive-system",
      metadata: { path: "/etc/shadow", kernel_id: KERNEL },
      pod: { name: "web", namespace: "default", container: { id: "containerd://e2e-web", name: "app" } },
      node: { name: NODE },
      authorization: "Bearer e2e-token",
    });

    // sed -i style replacement inside the container, then the kernel's parent-directory report.
    await agent.cd.exec("e2e-web", [
      "/bin/busybox",
      "sh",
      "-c",
      "echo changed > /etc/shadow.new && mv /etc/shadow.new /etc/shadow",
    ]);
    const fresh = fileKeyFromStat(statSync(join(rootfs, "etc/shadow"), { bigint: true }));
    const parent = kernel.entries.find((e) => e.kind === "parent");
    kernel.emit({ slot: parent?.slot ?? -1, kind: "parent", accesses: ["write"] });
    await eventually(
      async () => BigInt((await list())[0]?.spec["inode-no"] ?? 0) === fresh.ino,
      "HiveData follows the rename",
    );
    await eventually(
      () => kernel.entries.some((e) => e.kind === "file" && e.key.ino === fresh.ino),
      "kernel follows the rename",
    );

    await core.deleteNamespacedPod({ name: "web", namespace: "default" });
    await eventually(async () => (await list()).length === 0, "HiveData removed with the pod");
  });

  it("releases its Leases on shutdown and leaves the kernel program pinned for the next agent", async () => {
    agent.stop();
    expect(await agent.exited).toBe(0);
    const coordination = agent.api.kubeConfig().makeApiClient(CoordinationV1Api);
    const leases = await coordination.listNamespacedLease({ namespace: "hive-system" });
    expect(leases.items.map((l) => l.metadata?.name).sort()).toEqual([`hive-loader-${KERNEL}`, "hive-pods"]);
    for (const l of leases.items) expect(l.spec?.holderIdentity ?? "").toBe("");
    expect(agent.kernels.every((k) => k.closed)).toBe(true);
    // Pinned and attached still: its watch table keeps naming the slots for `hive status`.
    expect(agent.kernels.every((k) => k.keptPinned)).toBe(true);
    expect(existsSync(agent.tableFile)).toBe(true);
  });
});
