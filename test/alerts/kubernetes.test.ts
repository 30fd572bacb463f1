/**
 * The Kubernetes side of alerts, through the real @kubernetes/client-node over HTTP against
 * the API server stand-in: the pod Event recorder (create, then JSON-patch the count;
 * rate-limited) and the Secret header loader.
 */
import { CoreV1Api } from "@kubernetes/client-node";
import { afterEach, describe, expect, it } from "vitest";
import type { Alert } from "../../api/alert.ts";
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
import { isHiveError } from "../../runtime/errors.ts";
import { createHiveMetrics } from "../../runtime/metrics/metrics.ts";
import { serviceAccountUser } from "../apiserver/authn.ts";
import { installHive } from "../apiserver/install.ts";
import { type ApiServer, startApiServer } from "../apiserver/server.ts";
import { UNSAFE_TEXT } from "../fixtures/hostile-text.ts";
import { captureLogger, counterValue, makeEvent, makeSource } from "./fixtures.ts";

/** The stand-in with Hive installed; its Role lets the agent read the callback Secrets named. */
async function startApi(secrets: string[] = []): Promise<ApiServer> {
  const api = await startApiServer();
  cleanups.push(() => api.stop());
  const [headersSecret, signing] = secrets;
  const installed = installHive(api, {
    image: "hive:test",
    ...(headersSecret
      ? {
          callback: {
            url: "https://alerts.example/",
            headersSecret,
            ...(signing ? { signingSecret: { name: signing, key: "hmac-key" } } : {}),
          },
        }
      : {}),
  });
  cleanups.push(async () => installed.assertNoRefusals());
  return api;
}

const AGENT = serviceAccountUser("hive-system", "hive-agent", "node-a");

const eventsOf = (api: ApiServer) =>
  api.store.all(api.resource("events", "")) as unknown as Record<string, unknown>[];
const eventWrites = (api: ApiServer) =>
  api.requests.filter((r) => r.resource === "events" && r.group === "").map((r) => r.verb);

function coreClient(api: ApiServer): CoreV1Api {
  return api.kubeConfig(AGENT).makeApiClient(CoreV1Api);
}

/** The pod Event recorder of node-a's agent (through node-a's client), closed after the test. */
function startRecorder(api: ApiServer, options: Partial<PodEventRecorderOptions> = {}): PodEventRecorder {
  const recorder = createPodEventRecorder({
    core: coreClient(api),
    nodeName: "node-a",
    logger: captureLogger().logger,
    ...options,
  });
  cleanups.push(() => recorder.close());
  return recorder;
}

/** A Secret in hive-system per entry (values in clear; stored base64). */
async function createSecrets(api: ApiServer, secrets: Record<string, Record<string, string>>): Promise<void> {
  const admin = api.kubeConfig().makeApiClient(CoreV1Api);
  for (const [name, values] of Object.entries(secrets)) {
    const data = Object.fromEntries(
      Object.entries(values).map(([key, value]) => [key, Buffer.from(value).toString("base64")]),
    );
    await admin.createNamespacedSecret({ namespace: "hive-system", body: { metadata: { name }, data } });
  }
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
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
    const api = await startApi();
    const metrics = createHiveMetrics({ processMetrics: false });
    const recorder = startRecorder(api, {
      metrics,
      flushIntervalMs: 50,
    });
    recorder.record(alertFor("nginx-1", "trap-a", 1));
    await recorder.flush();
    expect(eventsOf(api)).toHaveLength(1);
    expect(eventWrites(api)).toEqual(["create"]);
    expect(eventsOf(api)[0]).toMatchObject({
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
    expect(eventsOf(api)).toHaveLength(1);
    expect(eventsOf(api)[0]?.count).toBe(10);
    expect(eventsOf(api)[0]?.message).toBe(
      "file /etc/shadow read/open by sh (pid 4010, /usr/bin/cat) in container nginx",
    );
    const patches = eventWrites(api).filter((v) => v === "patch");
    expect(patches.length).toBeGreaterThanOrEqual(1);
    expect(patches.length).toBeLessThan(9);
    expect(await counterValue(metrics.kubernetesEvents, { result: "created" })).toBe(1);
  });

  it("is found the way kubectl describe pod searches: by the pod's kind, name, namespace and UID", async () => {
    const api = await startApi();
    const admin = api.kubeConfig().makeApiClient(CoreV1Api);
    const pod = await admin.createNamespacedPod({
      namespace: "default",
      body: { metadata: { name: "nginx-1" }, spec: { containers: [{ name: "nginx", image: "nginx" }] } },
    });
    const uid = pod.metadata?.uid as string;
    const recorder = startRecorder(api);
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
    const api = await startApi();
    const metrics = createHiveMetrics({ processMetrics: false });
    const recorder = startRecorder(api, {
      metrics,
      writesPerSecond: 0.001,
      burst: 3,
    });
    for (let p = 0; p < 10; p++)
      for (let i = 0; i < 5; i++) recorder.record(alertFor(`pod-${p}`, "trap-a", i));
    await recorder.flush();
    // Three tokens: pod-0's Event is created at its first alert, then patched with the four
    // that followed; pod-1's is created with all five. Pods 2-9 wait for tokens, aggregated.
    expect(eventWrites(api)).toEqual(["create", "patch", "create"]);
    expect(eventsOf(api).map((e) => e.count)).toEqual([5, 5]);
    expect(await counterValue(metrics.kubernetesEvents, { result: "throttled" })).toBeGreaterThan(0);
  });

  it("writes what the container chose (comm, path, executable) escaped, on one line and bounded; the alert keeps it exact", async () => {
    const api = await startApi();
    const recorder = startRecorder(api);
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
    const message = String(eventsOf(api)[0]?.message);
    expect(message.length).toBeLessThanOrEqual(EVENT_MESSAGE_MAX);
    expect(message).not.toMatch(UNSAFE_TEXT);
    expect(message).toContain("by \\n\\x1b[31mfake (pid 4001, /tmp/\\r\\nlevel=error msg=forged\\x00xxx");
    expect(message).toMatch(/^file \/data\/(a\\u202e)+a?…/);
    expect(message).toMatch(/ in container nginx$/);
  });

  it("writes nothing for host alerts without a pod", async () => {
    const api = await startApi();
    const recorder = startRecorder(api, {
      nodeName: "n",
    });
    const alert = alertFor("x", "t", 1);
    delete alert.pod;
    recorder.record(alert);
    await recorder.flush();
    expect(eventWrites(api)).toEqual([]);
  });
});

describe("callback headers from a Secret", () => {
  it("reads each data key as a header through CoreV1Api", async () => {
    const api = await startApi(["callback-auth"]);
    await createSecrets(api, { "callback-auth": { Authorization: "Bearer abc", "X-Tenant": "blue" } });
    const headers = await loadSecretHeaders(coreClient(api), "hive-system", "callback-auth");
    expect(headers).toEqual({ Authorization: "Bearer abc", "X-Tenant": "blue" });
    expect(
      api.requests
        .filter((r) => r.user === "system:serviceaccount:hive-system:hive-agent")
        .map((r) => [r.verb, r.resource, r.name]),
    ).toEqual([["get", "secrets", "callback-auth"]]);
  });

  it("names the Secret and the fix when it is missing or holds a header-smuggling value", async () => {
    const api = await startApi(["nope", "bad"]);
    const missing = await loadSecretHeaders(coreClient(api), "hive-system", "nope").catch((e: unknown) => e);
    expect(isHiveError(missing, "ApiRequestFailed")).toBe(true);
    expect((missing as Error).message).toContain("not found");
    await createSecrets(api, { bad: { Authorization: "Bearer abc\r\nX-Evil: 1" } });
    const bad = await loadSecretHeaders(coreClient(api), "hive-system", "bad").catch((e: unknown) => e);
    expect(isHiveError(bad, "ConfigInvalid")).toBe(true);
  });
});

describe("callback settings resolved from Secrets", () => {
  it("binds the headers and the signing key to the default callback's origin only", async () => {
    const api = await startApi(["auth", "sign"]);
    await createSecrets(api, { auth: { Authorization: "Bearer abc" }, sign: { "hmac-key": "k3y" } });
    const destinations = await resolveDestinations(coreClient(api), {
      defaultCallback: "https://siem.example.com:8443/hive/alerts?tenant=a",
      headersSecret: { namespace: "hive-system", name: "auth" },
      signingSecret: { namespace: "hive-system", name: "sign" },
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
    const api = await startApi(["headers", "sign"]);
    await expect(
      resolveDestinations(coreClient(api), { headersSecret: { namespace: "a", name: "b" } }),
    ).rejects.toMatchObject({
      code: "ConfigInvalid",
    });
    await createSecrets(api, { sign: { other: "x" } });
    const err = await resolveDestinations(coreClient(api), {
      defaultCallback: "http://r.example/",
      signingSecret: { namespace: "hive-system", name: "sign" },
    }).catch((e: unknown) => e);
    expect(isHiveError(err, "ConfigInvalid")).toBe(true);
    expect((err as Error).message).toContain('"hmac-key"');
  });
});
