/**
 * A rotated callback token applies without a restart: the headers Secret lives in a real
 * kube-apiserver with Hive installed from its rendering, read and watched by node-a's agent (a
 * token bound to its Pod) through the real @kubernetes/client-node; a real receiver
 * accepts only the current token. After the rotation, alerts refused with 401 wait in the
 * spool, the Secret's change is seen by the watch, the new header is applied and every alert
 * arrives. The refusal also becomes a Warning Event in the monitor's namespace.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { AUTH_FAILURE_REASON, createAuthFailureReporter } from "../../runtime/alerts/auth-failure-event.ts";
import { watchCallbackSecrets } from "../../runtime/alerts/callback-secret-watch.ts";
import { resolveDestinations } from "../../runtime/alerts/delivery/destinations.ts";
import { createAlertPipeline } from "../../runtime/alerts/pipeline.ts";
import { createKubeClients } from "../../runtime/k8s/kube-client.ts";
import { createHiveMetrics } from "../../runtime/metrics/metrics.ts";
import { type Installed, installHive } from "../cluster/install.ts";
import { type RealApi, startRealApi } from "../cluster/real-api.ts";
import { waitFor } from "../cluster/testing.ts";
import { captureLogger, makeEvent, makeSource, testPipeline } from "./fixtures.ts";
import { startReceiver } from "./receiver.ts";

const NS = "hive-system";
const SECRET = "hive-callback-headers";
const b64 = (s: string) => Buffer.from(s).toString("base64");

let api: RealApi;
let installed: Installed;
/** node-a's agent: a token bound to its Pod, through the proxy. */
let agent: KubeConfig;
beforeAll(async () => {
  api = await startRealApi();
  // The agent may read the headers Secret because the rendered Role names it.
  installed = installHive(api.cp, {
    image: "hive:test",
    namespace: NS,
    callback: { url: "https://alerts.example/", headersSecret: SECRET },
  });
  agent = api.cp.kubeConfig(await installed.agentToken("node-a"), api.url);
});
afterAll(async () => {
  await api?.stop();
});

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  installed.assertNoRefusals();
});

/** The callback headers Secret in the monitor's namespace, removed after the test. */
async function apiWithSecret(authorization: string) {
  const admin = api.kubeConfig().makeApiClient(CoreV1Api);
  await admin.createNamespacedSecret({
    namespace: NS,
    body: { metadata: { name: SECRET }, data: { Authorization: b64(authorization) } },
  });
  cleanups.push(async () => {
    await admin.deleteNamespacedSecret({ namespace: NS, name: SECRET });
  });
  return { admin };
}

describe("callback secret rotation", () => {
  it("applies a rotated header token without a restart and loses no alert; the refusal is an Event", async () => {
    const { admin } = await apiWithSecret("Bearer old-token");

    const receiver = await startReceiver();
    cleanups.push(() => receiver.close());
    let token = "Bearer old-token";
    receiver.fault = (_n, req) =>
      req.headers.authorization === token ? { kind: "ok" } : { kind: "status", status: 401 };

    // The agent's own clients, as node-a's service account.
    const clients = createKubeClients({ kubeConfig: agent });
    const settings = { defaultCallback: receiver.url, headersSecret: { namespace: NS, name: SECRET } };
    const resolve = () => resolveDestinations(clients.core, settings);
    const initial = await resolve();

    const spoolDir = mkdtempSync(join(tmpdir(), "hive-rotation-"));
    cleanups.push(() => rmSync(spoolDir, { recursive: true, force: true }));
    const { logger, lines } = captureLogger();
    const pipeline = await createAlertPipeline({
      logger,
      metrics: createHiveMetrics({ processMetrics: false }),
      defaultCallback: receiver.url,
      lines: false,
      rateLimit: false,
      spool: { dir: spoolDir },
      delivery: {
        destinations: initial,
        backoffBaseMs: 50,
        onAuthFailure: createAuthFailureReporter({
          core: clients.core,
          namespace: NS,
          podName: "hive-agent-x7k2p",
          nodeName: "node-a",
          logger,
        }),
      },
    });
    cleanups.push(() => pipeline.close());
    const watch = watchCallbackSecrets({
      clients,
      namespace: NS,
      names: [SECRET],
      resolve,
      apply: (list) => pipeline.setDestinations(list),
      initial,
      logger,
      backoff: { baseMs: 50, maxMs: 500 },
    });
    cleanups.push(() => watch.stop());
    await watch.whenSynced;

    const ids: string[] = [];
    const send = (from: number, to: number) => {
      for (let n = from; n <= to; n++) {
        const alert = pipeline.handle(makeEvent(n), makeSource(`trap-${n % 3}`));
        if (alert) ids.push(alert.id);
      }
    };
    send(1, 5);
    await receiver.waitForDistinct(5, 10_000);

    // The receiver rotates first: alerts sent now are refused and wait.
    token = "Bearer new-token";
    send(6, 10);
    await waitFor(() => receiver.requests > 5, { timeoutMs: 10_000, what: "refused attempts" });
    await waitFor(
      async () =>
        (await admin.listNamespacedEvent({ namespace: NS })).items.find(
          (e) => e.reason === AUTH_FAILURE_REASON,
        ),
      { timeoutMs: 10_000, what: "the auth failure Event" },
    );
    expect(pipeline.pending()).toBeGreaterThan(0);

    // Then the Secret: no restart, no call into the pipeline from the test.
    await admin.replaceNamespacedSecret({
      namespace: NS,
      name: SECRET,
      body: { metadata: { name: SECRET }, data: { Authorization: b64("Bearer new-token") } },
    });
    send(11, 12);
    await receiver.waitForDistinct(12, 15_000);
    expect(await pipeline.drain(10_000)).toBe(true);

    expect(new Set(receiver.accepted.map((r) => r.id))).toEqual(new Set(ids));
    expect(ids).toHaveLength(12);
    for (const r of receiver.accepted.slice(5)) expect(r.headers.authorization).toBe("Bearer new-token");
    const applied = lines.filter(
      (l) => l.msg === "callback secrets changed; new credentials applied without a restart",
    );
    expect(applied).toHaveLength(1);
    expect(applied[0]).toMatchObject({ namespace: NS, secrets: [SECRET] });
    expect(JSON.stringify(lines)).not.toContain("new-token");
    const event = (await admin.listNamespacedEvent({ namespace: NS })).items.find(
      (e) => e.reason === AUTH_FAILURE_REASON,
    );
    expect(event).toMatchObject({
      type: "Warning",
      involvedObject: { kind: "Pod", name: "hive-agent-x7k2p", namespace: NS },
    });
    expect(event?.message).toContain("401");
  });

  it("keeps the previous credentials when the changed Secret cannot be used", async () => {
    const { admin } = await apiWithSecret("Bearer a");
    const clients = createKubeClients({ kubeConfig: agent });
    const settings = {
      defaultCallback: "http://127.0.0.1:9/alerts",
      headersSecret: { namespace: NS, name: SECRET },
    };
    const applied: unknown[] = [];
    const { logger, lines } = captureLogger();
    const watch = watchCallbackSecrets({
      clients,
      namespace: NS,
      names: [SECRET, SECRET],
      resolve: () => resolveDestinations(clients.core, settings),
      apply: (list) => applied.push(list),
      initial: await resolveDestinations(clients.core, settings),
      logger,
      backoff: { baseMs: 50, maxMs: 500 },
    });
    cleanups.push(() => watch.stop());
    await watch.whenSynced;
    expect(applied).toEqual([]); // the first list repeats what was read at start

    // A value that would smuggle a header (a Secret's keys cannot hold a bad header name: the
    // server allows only letters, digits, '-', '_' and '.' in them).
    await admin.replaceNamespacedSecret({
      namespace: NS,
      name: SECRET,
      body: { metadata: { name: SECRET }, data: { Authorization: b64("Bearer b\r\nX-Evil: 1") } },
    });
    await waitFor(
      () => lines.some((l) => String(l.msg).startsWith("cannot read the changed callback secrets")),
      {
        timeoutMs: 5000,
      },
    );
    expect(applied).toEqual([]);
  });
});

describe("callback credentials not read yet", () => {
  it("sends nothing to that callback until they are, then every waiting alert with them", async () => {
    const receiver = await startReceiver();
    cleanups.push(() => receiver.close());
    const dir = mkdtempSync(join(tmpdir(), "hive-pending-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    // What the agent starts with when the headers Secret cannot be read (the API server away).
    const { pipeline } = await testPipeline({
      defaultCallback: receiver.url,
      spool: { dir },
      delivery: {
        destinations: [{ urlPrefix: receiver.url, pending: "the headers Secret is not read yet" }],
        backoffBaseMs: 20,
        backoffMaxMs: 100,
      },
    });
    cleanups.push(() => pipeline.close());
    const ids = [1, 2, 3].map((n) => pipeline.handle(makeEvent(n), makeSource("trap-pending"))?.id);
    await new Promise((r) => setTimeout(r, 1500));
    expect(receiver.requests).toBe(0); // never sent without its credentials
    pipeline.setDestinations([
      { urlPrefix: receiver.url, headers: { Authorization: "Bearer read-at-last" } },
    ]);
    await receiver.waitForDistinct(3, 10_000);
    expect(new Set(receiver.accepted.map((r) => r.id))).toEqual(new Set(ids));
    for (const r of receiver.accepted) expect(r.headers.authorization).toBe("Bearer read-at-last");
  });
});
