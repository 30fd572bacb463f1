/**
 * The Kubernetes side of alerts, through the real @kubernetes/client-node against a real
 * kube-apiserver with Hive installed from its rendering: the pod Event recorder (create, then
 * JSON-patch the count; rate-limited) and the Secret header loader, as node-a's agent with a
 * token bound to its Pod, so the server's RBAC is the component's own.
 */
import { CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { Alert } from "../../api/alert.ts";
import { isHiveError } from "../../api/errors.ts";
import { createBootClock } from "../../runtime/alerts/boot-clock.ts";
import { buildAlert } from "../../runtime/alerts/build-alert.ts";
import { resolveDestinations } from "../../runtime/alerts/delivery/destinations.ts";
import { loadSecretHeaders } from "../../runtime/alerts/delivery/secret-headers.ts";
import {
  createPodEventRecorder,
  EVENT_MESSAGE_MAX,
  EVENT_REASON,
  type PodEventRecorder,
  type PodEventRecorderOptions,
} from "../../runtime/alerts/pod-events.ts";
import type { CoreApi } from "../../runtime/k8s/kube-apis.ts";
import { createKubeClients } from "../../runtime/k8s/kube-client.ts";
import { createHiveMetrics } from "../../runtime/metrics/metrics.ts";
import { type Installed, installHive } from "../cluster/install.ts";
import { type RealApi, startRealApi } from "../cluster/real-api.ts";
import { UNSAFE_TEXT } from "../fixtures/hostile-text.ts";
import { captureLogger, counterValue, makeEvent, makeSource } from "./fixtures.ts";

const NS = "hive-system";
/** The callback Secrets the monitor names, so the rendered Role lets the agent read them. */
const HEADERS = "callback-headers";
const SIGNING = "callback-signing";

let api: RealApi;
let installed: Installed;
/** node-a's agent, through the proxy (which records its requests). */
let agent: KubeConfig;
/** The test's own reads and writes, straight to the server (the proxy records only the agent's). */
let admin: CoreV1Api;

beforeAll(async () => {
  api = await startRealApi();
  installed = installHive(api.cp, {
    image: "hive:test",
    namespace: NS,
    callback: {
      url: "https://alerts.example/",
      headersSecret: HEADERS,
      signingSecret: { name: SIGNING, key: "hmac-key" },
    },
  });
  agent = api.cp.kubeConfig(await installed.agentToken("node-a"), api.url);
  admin = api.cp.adminKubeConfig().makeApiClient(CoreV1Api);
});
afterAll(async () => {
  await api?.stop();
});

/** Hive's Events in the pods' namespace, as the server holds them. */
const eventsOf = async () =>
  (
    await admin.listNamespacedEvent({
      namespace: "default",
      labelSelector: "app.kubernetes.io/managed-by=hive",
    })
  ).items;
/** The agent's requests on Events, in order. */
const eventWrites = () =>
  api.requests
    .filter((r) => r.resource === "events" && r.group === "" && r.user === installed.agentUser)
    .map((r) => r.verb);

/** The agent's own client, as it runs. */
function coreClient(): CoreApi {
  return createKubeClients({ kubeConfig: agent }).core;
}

/** The pod Event recorder of node-a's agent (through node-a's client), closed after the test. */
function startRecorder(options: Partial<PodEventRecorderOptions> = {}): PodEventRecorder {
  const recorder = createPodEventRecorder({
    core: coreClient(),
    nodeName: "node-a",
    logger: captureLogger().logger,
    ...options,
  });
  cleanups.push(() => recorder.close());
  return recorder;
}

/** A Secret in the monitor's namespace per entry (values in clear; stored base64). */
async function createSecrets(secrets: Record<string, Record<string, string>>): Promise<void> {
  for (const [name, values] of Object.entries(secrets)) {
    const data = Object.fromEntries(
      Object.entries(values).map(([key, value]) => [key, Buffer.from(value).toString("base64")]),
    );
    await admin.createNamespacedSecret({ namespace: NS, body: { metadata: { name }, data } });
  }
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  // Each test starts with no Events and no callback Secrets, and the agent was refused nothing.
  await admin.deleteCollectionNamespacedEvent({ namespace: "default" });
  for (const name of [HEADERS, SIGNING])
    await admin.deleteNamespacedSecret({ namespace: NS, name }).catch(() => undefined);
  installed.assertNoRefusals();
  api.resetRequests();
});

const clock = createBootClock();
function alertFor(pod: string, trap: string, n: number, comm = "cat"): Alert {
  const source = makeSource(trap);
  source.annotations.pod_name = pod;
  return buildAlert(makeEvent(n, { comm, ktimeNs: clock.nowKtimeNs() }), source, {
    clock,
  });
}

describe("Kubernetes Events for alerts", () => {
  it("creates one Event per pod and trap, then raises its count by patching, as kubectl describe shows it", async () => {
    const metrics = createHiveMetrics({ processMetrics: false });
    const recorder = startRecorder({
      metrics,
      flushIntervalMs: 50,
    });
    recorder.record(alertFor("nginx-1", "trap-a", 1));
    await recorder.flush();
    expect(await eventsOf()).toHaveLength(1);
    expect(eventWrites()).toEqual(["create"]);
    expect((await eventsOf())[0]).toMatchObject({
      involvedObject: { kind: "Pod", apiVersion: "v1", name: "nginx-1", namespace: "default" },
      reason: EVENT_REASON,
      type: "Warning",
      count: 1,
      message: "file /etc/shadow read/open by cat (pid 4001, /usr/bin/cat) in container nginx",
      source: { component: "hive-agent", host: "node-a" },
      reportingInstance: "node-a",
    });
    for (let i = 2; i <= 10; i++) recorder.record(alertFor("nginx-1", "trap-a", i, "sh"));
    await recorder.flush();
    expect(await eventsOf()).toHaveLength(1);
    const [event] = await eventsOf();
    expect(event?.count).toBe(10);
    expect(event?.message).toBe(
      "file /etc/shadow read/open by sh (pid 4010, /usr/bin/cat) in container nginx",
    );
    const patches = eventWrites().filter((v) => v === "patch");
    expect(patches.length).toBeGreaterThanOrEqual(1);
    expect(patches.length).toBeLessThan(9);
    expect(await counterValue(metrics.kubernetesEvents, { result: "created" })).toBe(1);
  });

  it("is found the way kubectl describe pod searches: by the pod's kind, name, namespace and UID", async () => {
    const pod = await admin.createNamespacedPod({
      namespace: "default",
      body: { metadata: { name: "nginx-1" }, spec: { containers: [{ name: "nginx", image: "nginx" }] } },
    });
    const uid = pod.metadata?.uid as string;
    const recorder = startRecorder();
    recorder.record(alertFor("nginx-1", "trap-a", 1), uid);
    await recorder.flush();
    const found = await admin.listNamespacedEvent({
      namespace: "default",
      fieldSelector: `involvedObject.name=nginx-1,involvedObject.namespace=default,involvedObject.kind=Pod,involvedObject.uid=${uid}`,
    });
    expect(found.items.map((e) => e.message)).toEqual([
      "file /etc/shadow read/open by cat (pid 4001, /usr/bin/cat) in container nginx",
    ]);
  });

  it("limits API writes with a token bucket and aggregates what it could not write yet", async () => {
    const metrics = createHiveMetrics({ processMetrics: false });
    const recorder = startRecorder({
      metrics,
      writesPerSecond: 0.001,
      burst: 3,
    });
    for (let p = 0; p < 10; p++)
      for (let i = 0; i < 5; i++) recorder.record(alertFor(`pod-${p}`, "trap-a", i));
    await recorder.flush();
    // Three tokens: pod-0's Event is created at its first alert, then patched with the four
    // that followed; pod-1's is created with all five. Pods 2-9 wait for tokens, aggregated.
    expect(eventWrites()).toEqual(["create", "patch", "create"]);
    expect((await eventsOf()).map((e) => e.count)).toEqual([5, 5]);
    expect(await counterValue(metrics.kubernetesEvents, { result: "throttled" })).toBeGreaterThan(0);
  });

  it("writes what the container chose (comm, path, executable) escaped, on one line and bounded; the alert keeps it exact", async () => {
    const recorder = startRecorder();
    const hostilePath = `/data/${"a\u202e".repeat(2048)}`; // 4 KiB of a name with bidi overrides
    const source = makeSource("trap-a");
    source.annotations.path = hostilePath;
    const alert = buildAlert(
      makeEvent(1, {
        comm: "\n\x1b[31mfake",
        ktimeNs: clock.nowKtimeNs(),
        process: {
          ...makeEvent(1).process,
          exe: { exe: `/tmp/\r\nlevel=error msg=forged\u0000${"x".repeat(4096)}`, source: "exec" },
        },
      }),
      source,
      { clock },
    );
    expect(alert.metadata.path).toBe(hostilePath);
    recorder.record(alert);
    await recorder.flush();
    const message = String((await eventsOf())[0]?.message);
    expect(message.length).toBeLessThanOrEqual(EVENT_MESSAGE_MAX);
    expect(message).not.toMatch(UNSAFE_TEXT);
    expect(message).toContain("by \\n\\x1b[31mfake (pid 4001, /tmp/\\r\\nlevel=error msg=forged\\x00xxx");
    expect(message).toMatch(/^file \/data\/(a\\u202e)+a?…/);
    expect(message).toMatch(/ in container nginx$/);
  });

  it("writes nothing for host alerts without a pod", async () => {
    const recorder = startRecorder({
      nodeName: "n",
    });
    const alert = alertFor("x", "t", 1);
    delete alert.pod;
    recorder.record(alert);
    await recorder.flush();
    expect(eventWrites()).toEqual([]);
  });
});

describe("callback headers from a Secret", () => {
  it("reads each data key as a header through CoreV1Api", async () => {
    await createSecrets({ [HEADERS]: { Authorization: "Bearer abc", "X-Tenant": "blue" } });
    const headers = await loadSecretHeaders(coreClient(), NS, HEADERS);
    expect(headers).toEqual({ Authorization: "Bearer abc", "X-Tenant": "blue" });
    expect(
      api.requests.filter((r) => r.user === installed.agentUser).map((r) => [r.verb, r.resource, r.name]),
    ).toEqual([["get", "secrets", HEADERS]]);
  });

  it("names the Secret and the fix when it is missing or holds a header-smuggling value", async () => {
    const missing = await loadSecretHeaders(coreClient(), NS, HEADERS).catch((e: unknown) => e);
    expect(isHiveError(missing, "ApiRequestFailed")).toBe(true);
    expect((missing as Error).message).toContain("not found");
    await createSecrets({ [HEADERS]: { Authorization: "Bearer abc\r\nX-Evil: 1" } });
    const bad = await loadSecretHeaders(coreClient(), NS, HEADERS).catch((e: unknown) => e);
    expect(isHiveError(bad, "ConfigInvalid")).toBe(true);
  });
});

describe("callback settings resolved from Secrets", () => {
  it("binds the headers and the signing key to the default callback's origin only", async () => {
    await createSecrets({ [HEADERS]: { Authorization: "Bearer abc" }, [SIGNING]: { "hmac-key": "k3y" } });
    const destinations = await resolveDestinations(coreClient(), {
      defaultCallback: "https://siem.example.com:8443/hive/alerts?tenant=a",
      headersSecret: { namespace: NS, name: HEADERS },
      signingSecret: { namespace: NS, name: SIGNING },
      format: "cloudevents",
    });
    expect(destinations).toEqual([
      {
        urlPrefix: "https://siem.example.com:8443/",
        headers: { Authorization: "Bearer abc" },
        hmacSecrets: [Buffer.from("k3y")],
        format: "cloudevents",
      },
    ]);
  });

  it("refuses secrets with no URL to send them to, and names a missing signing key", async () => {
    await expect(
      resolveDestinations(coreClient(), { headersSecret: { namespace: "a", name: "b" } }),
    ).rejects.toMatchObject({
      code: "ConfigInvalid",
    });
    await createSecrets({ [SIGNING]: { other: "x" } });
    const err = await resolveDestinations(coreClient(), {
      defaultCallback: "http://r.example/",
      signingSecret: { namespace: NS, name: SIGNING },
    }).catch((e: unknown) => e);
    expect(isHiveError(err, "ConfigInvalid")).toBe(true);
    expect((err as Error).message).toContain('"hmac-key"');
  });
});
