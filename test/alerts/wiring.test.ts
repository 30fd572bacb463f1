/**
 * The alert pipeline wired as the agent wires it: callback settings resolved from Secrets,
 * Kubernetes Events on the pod, the spool, and the metrics server's /metrics and /readyz,
 * all through real HTTP (receiver, a real kube-apiserver with Hive installed from its rendering,
 * metrics port). What an operator scrapes must match what the receiver and the API server saw.
 */
import { createHmac } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CoreV1Api } from "@kubernetes/client-node";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { LABEL_TRAP_ID } from "../../api/meta.ts";
import { alertSourceFromHiveData } from "../../runtime/alerts/alert-source.ts";
import { resolveDestinations } from "../../runtime/alerts/delivery/destinations.ts";
import { createAlertPipeline } from "../../runtime/alerts/pipeline.ts";
import { createPodEventRecorder } from "../../runtime/alerts/pod-events.ts";
import { createKubeClients } from "../../runtime/k8s/kube-client.ts";
import { createHealth } from "../../runtime/metrics/health.ts";
import { createHiveMetrics } from "../../runtime/metrics/metrics.ts";
import { startMetricsServer } from "../../runtime/metrics/server.ts";
import { type Installed, installHive } from "../cluster/install.ts";
import { type RealApi, startRealApi } from "../cluster/real-api.ts";
import { assertValidAlert, captureLogger, KERNEL_ID, makeEvent } from "./fixtures.ts";
import { startReceiver } from "./receiver.ts";

let api: RealApi;
let installed: Installed;
beforeAll(async () => {
  api = await startRealApi();
  installed = installHive(api.cp, {
    image: "hive:test",
    callback: { url: "https://alerts.example/", signingSecret: { name: "hive-callback", key: "hmac-key" } },
  });
});
afterAll(async () => {
  await api?.stop();
});

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  installed.assertNoRefusals();
});

/** One sample of a metric from Prometheus text, by name and exact label set text. */
function sample(text: string, name: string, labels = ""): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(`${name}${labels ? `{${labels}}` : ""} `));
  return line === undefined ? undefined : Number(line.split(" ").at(-1));
}

describe("alert pipeline wired like the agent", () => {
  it("delivers signed alerts, records pod Events, and /metrics and /readyz tell the same story", async () => {
    const receiver = await startReceiver();
    cleanups.push(() => receiver.close());
    const dir = mkdtempSync(join(tmpdir(), "hive-wiring-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));

    // The test's own writes and reads go straight to the server; the proxy sees only the agent's.
    const admin = api.cp.adminKubeConfig().makeApiClient(CoreV1Api);
    await admin.createNamespacedSecret({
      namespace: "hive-system",
      body: {
        metadata: { name: "hive-callback" },
        data: { "hmac-key": Buffer.from("wired-key").toString("base64") },
      },
    });
    const pod = await admin.createNamespacedPod({
      namespace: "default",
      body: { metadata: { name: "web-0" }, spec: { containers: [{ name: "web", image: "nginx" }] } },
    });

    // --- the agent's wiring: node-a's agent, by a token bound to its Pod ---
    const token = await installed.agentToken("node-a");
    const core = createKubeClients({ kubeConfig: api.cp.kubeConfig(token, api.url) }).core;
    const { logger } = captureLogger();
    const metrics = createHiveMetrics();
    const health = createHealth();
    const destinations = await resolveDestinations(core, {
      defaultCallback: receiver.url,
      signingSecret: { namespace: "hive-system", name: "hive-callback" },
    });
    const pipeline = await createAlertPipeline({
      logger,
      metrics,
      defaultCallback: receiver.url,
      spool: { dir },
      lines: false,
      delivery: { destinations },
      podEvents: createPodEventRecorder({ core, nodeName: "node-a", logger, metrics }),
    });
    cleanups.push(() => pipeline.close());
    health.addReadinessCheck("alert-spool", () => pipeline.health());
    const server = await startMetricsServer({
      registry: metrics.registry,
      health,
      port: 0,
      host: "127.0.0.1",
    });
    cleanups.push(() => server.close());

    // A HiveData as the loader's index holds it (written by discover beside its pod).
    const source = alertSourceFromHiveData(
      {
        metadata: {
          name: "web-0-shadow",
          namespace: "hive-system",
          labels: { [LABEL_TRAP_ID]: "trap-w" },
          annotations: {
            hive_policy_name: "shadow-watch",
            path: "/etc/shadow",
            pod_name: "web-0",
            namespace: "default",
            container_id: "containerd://abc",
            container_name: "web",
            node_name: "node-a",
            pod_ip: "10.0.0.9",
            pod_uid: pod.metadata?.uid ?? "",
          },
        },
        spec: {
          "inode-no": 131073,
          "kernel-id": KERNEL_ID,
          device: { major: 259, minor: 1 },
          accesses: ["read"],
        },
      },
      // The live trap the loader found by that trap-id: no callback of its own, so the monitor's.
      {
        trapId: "trap-w",
        policy: { namespace: "security", name: "shadow-watch" },
        trap: { path: "/etc/shadow" },
      },
      { nodeName: "node-a" },
    );
    for (let i = 0; i < 5; i++) pipeline.handle(makeEvent(i), source);
    expect(await pipeline.drain(10_000)).toBe(true);

    // The receiver: five alerts, each signed with the key from the Secret.
    expect(receiver.accepted).toHaveLength(5);
    for (const got of receiver.accepted) {
      assertValidAlert(JSON.parse(got.body));
      const [t, v1] = String(got.headers["hive-signature"]).split(",");
      const ts = (t as string).slice(2);
      expect((v1 as string).slice(3)).toBe(
        createHmac("sha256", "wired-key").update(`${ts}.${got.body}`).digest("hex"),
      );
    }

    // The API server: one Event on the pod, by UID, counting the five accesses.
    await pipeline.close();
    const events = await admin.listNamespacedEvent({
      namespace: "default",
      fieldSelector: `involvedObject.uid=${pod.metadata?.uid}`,
    });
    expect(events.items.map((e) => [e.reason, e.count])).toEqual([["FileAccessed", 5]]);

    // The metrics port agrees.
    const text = await (await fetch(`${server.url}/metrics`)).text();
    const origin = new URL(receiver.url).origin;
    expect(sample(text, "hive_alerts_delivered_total", `destination="${origin}"`)).toBe(5);
    expect(sample(text, "hive_alert_delivery_attempts_total", `destination="${origin}"`)).toBe(
      receiver.requests,
    );
    expect(
      sample(text, "hive_alerts_total", 'policy_namespace="security",policy="shadow-watch",trap_id="trap-w"'),
    ).toBe(5);
    expect(sample(text, "hive_spool_alerts")).toBe(0);
    const eventWrites =
      (sample(text, "hive_kubernetes_events_total", 'result="created"') ?? 0) +
      (sample(text, "hive_kubernetes_events_total", 'result="patched"') ?? 0);
    expect(eventWrites).toBe(
      api.requests.filter((r) => r.resource === "events" && r.user === installed.agentUser).length,
    );
    expect((await fetch(`${server.url}/readyz?verbose`)).status).toBe(200);
  });
});
