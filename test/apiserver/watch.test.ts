/**
 * The stand-in's watch protocol, driven by client-node's Watch: event types and order,
 * selector transitions, bookmarks, resume from a resourceVersion, 410 Expired as an ERROR
 * event, and a restart that drops every stream but keeps state. Also request accounting
 * and fault injection, which controller tests use to measure and to break things.
 */
import { CoreV1Api, type KubeConfig, Watch } from "@kubernetes/client-node";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { clusterAdmin } from "./authn.ts";
import { type ApiServer, startApiServer } from "./server.ts";
import { podBody, rejection, setPodRunning, statusOf, waitFor } from "./testing.ts";

interface Seen {
  type: string;
  name: string | undefined;
  rv: string | undefined;
  object: Record<string, unknown>;
}

let api: ApiServer;
let kc: KubeConfig;
let core: CoreV1Api;
const controllers: AbortController[] = [];

async function watch(path: string, query: Record<string, string | number | boolean | undefined>) {
  const events: Seen[] = [];
  const done: { err?: unknown; called: boolean } = { called: false };
  const controller = await new Watch(kc).watch(
    path,
    query,
    (type, object) =>
      events.push({ type, name: object?.metadata?.name, rv: object?.metadata?.resourceVersion, object }),
    (err) => {
      done.called = true;
      done.err = err;
    },
  );
  controllers.push(controller);
  return { events, done };
}

beforeAll(async () => {
  api = await startApiServer({ bookmarkIntervalMs: 100, historyLimit: 50 });
  kc = api.kubeConfig(clusterAdmin("watcher"));
  core = kc.makeApiClient(CoreV1Api);
});
afterEach(() => {
  for (const c of controllers.splice(0)) c.abort();
});
afterAll(async () => {
  await api.stop();
});

describe("watch", () => {
  it("streams ADDED, MODIFIED, DELETED in order with increasing resourceVersions", async () => {
    await core.createNamespace({ body: { metadata: { name: "w1" } } });
    const list = await core.listNamespacedPod({ namespace: "w1" });
    const w = await watch("/api/v1/namespaces/w1/pods", { resourceVersion: list.metadata?.resourceVersion });
    await core.createNamespacedPod({ namespace: "w1", body: podBody("a") });
    await core.patchNamespacedPod({
      namespace: "w1",
      name: "a",
      body: [{ op: "add", path: "/metadata/labels", value: { x: "y" } }],
    });
    await core.deleteNamespacedPod({ namespace: "w1", name: "a" });
    await waitFor(() => w.events.length >= 3, { what: "three events" });
    expect(w.events.map((e) => e.type)).toEqual(["ADDED", "MODIFIED", "DELETED"]);
    const rvs = w.events.map((e) => Number(e.rv));
    expect([...rvs].sort((a, b) => a - b)).toEqual(rvs);
    expect(new Set(rvs).size).toBe(3);
    expect(w.events[0]?.object.kind).toBe("Pod");
  });

  it("without a resourceVersion starts with ADDED for every existing object", async () => {
    await core.createNamespace({ body: { metadata: { name: "w2" } } });
    await core.createNamespacedPod({ namespace: "w2", body: podBody("x1") });
    await core.createNamespacedPod({ namespace: "w2", body: podBody("x2") });
    const w = await watch("/api/v1/namespaces/w2/pods", {});
    await waitFor(() => w.events.length >= 2);
    expect(w.events.map((e) => `${e.type} ${e.name}`).sort()).toEqual(["ADDED x1", "ADDED x2"]);
  });

  it("turns label changes into ADDED / DELETED for a selector watch", async () => {
    await core.createNamespace({ body: { metadata: { name: "w3" } } });
    await core.createNamespacedPod({ namespace: "w3", body: podBody("p", { labels: { security: "low" } }) });
    const rv = (await core.listNamespacedPod({ namespace: "w3" })).metadata?.resourceVersion;
    const w = await watch("/api/v1/namespaces/w3/pods", {
      resourceVersion: rv,
      labelSelector: "security=high",
    });
    const relabel = (value: string) =>
      core.patchNamespacedPod({
        namespace: "w3",
        name: "p",
        body: [{ op: "replace", path: "/metadata/labels/security", value }],
      });
    await relabel("high");
    await relabel("low");
    await waitFor(() => w.events.length >= 2);
    expect(w.events.map((e) => e.type)).toEqual(["ADDED", "DELETED"]);
    expect(w.events[1]?.object.metadata).toMatchObject({ labels: { security: "low" } });
  });

  it("sends BOOKMARKs only when asked, carrying the current resourceVersion", async () => {
    const rv = (await core.listNamespacedPod({ namespace: "default" })).metadata?.resourceVersion;
    const withMarks = await watch("/api/v1/namespaces/default/pods", {
      resourceVersion: rv,
      allowWatchBookmarks: true,
    });
    const without = await watch("/api/v1/namespaces/default/pods", { resourceVersion: rv });
    await waitFor(() => withMarks.events.some((e) => e.type === "BOOKMARK"), { what: "a bookmark" });
    const mark = withMarks.events.find((e) => e.type === "BOOKMARK");
    expect(mark?.object).toMatchObject({ kind: "Pod", apiVersion: "v1" });
    expect(Number(mark?.rv)).toBeGreaterThanOrEqual(Number(rv));
    expect(without.events).toEqual([]);
  });

  it("resumes from a resourceVersion, replaying what happened since", async () => {
    await core.createNamespace({ body: { metadata: { name: "w4" } } });
    const rv = (await core.listNamespacedPod({ namespace: "w4" })).metadata?.resourceVersion;
    await core.createNamespacedPod({ namespace: "w4", body: podBody("missed-1") });
    await core.createNamespacedPod({ namespace: "w4", body: podBody("missed-2") });
    const w = await watch("/api/v1/namespaces/w4/pods", { resourceVersion: rv });
    await waitFor(() => w.events.length >= 2);
    expect(w.events.map((e) => `${e.type} ${e.name}`)).toEqual(["ADDED missed-1", "ADDED missed-2"]);
  });

  it("answers a resourceVersion older than the retained history with an ERROR event carrying 410 Expired", async () => {
    await core.createNamespace({ body: { metadata: { name: "w5" } } });
    const old = (await core.listNamespacedPod({ namespace: "w5" })).metadata?.resourceVersion;
    // historyLimit is 50: push the window past `old`.
    for (let i = 0; i < 60; i++)
      await core.createNamespacedConfigMap({ namespace: "w5", body: { metadata: { name: `c${i}` } } });
    const w = await watch("/api/v1/namespaces/w5/pods", { resourceVersion: old });
    await waitFor(() => w.done.called, { what: "the stream to end" });
    expect(w.events).toHaveLength(1);
    expect(w.events[0]?.type).toBe("ERROR");
    expect(w.events[0]?.object).toMatchObject({
      kind: "Status",
      apiVersion: "v1",
      status: "Failure",
      reason: "Expired",
      code: 410,
    });
    expect(String(w.events[0]?.object.message)).toMatch(/^too old resource version: \d+ \(\d+\)$/);
    // A resourceVersion inside the window still works.
    const recent = (await core.listNamespacedPod({ namespace: "w5" })).metadata?.resourceVersion;
    const ok = await watch("/api/v1/namespaces/w5/pods", { resourceVersion: recent });
    await core.createNamespacedPod({ namespace: "w5", body: podBody("fresh") });
    await waitFor(() => ok.events.length >= 1);
    expect(ok.events[0]?.type).toBe("ADDED");
  });

  it("restart() ends every stream mid-watch and keeps all objects and resourceVersions", async () => {
    await core.createNamespace({ body: { metadata: { name: "w6" } } });
    await core.createNamespacedPod({ namespace: "w6", body: podBody("kept") });
    const rv = (await core.listNamespacedPod({ namespace: "w6" })).metadata?.resourceVersion;
    const w = await watch("/api/v1/namespaces/w6/pods", { resourceVersion: rv });
    await waitFor(() => api.watchCount() > 0);
    await api.restart({ downtimeMs: 20 });
    await waitFor(() => w.done.called, { what: "the client to see the stream end" });
    const after = await core.listNamespacedPod({ namespace: "w6" });
    expect(after.items.map((p) => p.metadata?.name)).toEqual(["kept"]);
    expect(Number(after.metadata?.resourceVersion)).toBe(Number(rv));
    const resumed = await watch("/api/v1/namespaces/w6/pods", { resourceVersion: rv });
    await core.createNamespacedPod({ namespace: "w6", body: podBody("new") });
    await waitFor(() => resumed.events.length >= 1);
    expect(resumed.events[0]?.name).toBe("new");
  });

  it("ends a watch after timeoutSeconds, cleanly", async () => {
    const w = await watch("/api/v1/namespaces/default/pods", { timeoutSeconds: 1 });
    await waitFor(() => w.done.called, { timeoutMs: 3000, what: "timeout" });
    expect(w.done.err).toBeNull();
  });
});

describe("request accounting and faults", () => {
  it("counts requests by verb, resource and user (bearer token)", async () => {
    api.resetRequests();
    const nodeA = api.kubeConfig(clusterAdmin("node-a")).makeApiClient(CoreV1Api);
    const nodeB = api.kubeConfig(clusterAdmin("node-b")).makeApiClient(CoreV1Api);
    await nodeA.listNamespacedPod({ namespace: "default" });
    await nodeA.listNamespacedPod({ namespace: "default" });
    await nodeB.createNamespacedPod({ namespace: "default", body: podBody("counted") });
    expect(api.countRequests({ user: "node-a", verb: "list", resource: "pods" })).toBe(2);
    expect(api.countRequests({ user: "node-b", verb: "create" })).toBe(1);
    expect(api.countRequests({ user: "node-b", verb: "list" })).toBe(0);
    expect(api.requests.find((r) => r.verb === "create")).toMatchObject({ namespace: "default", code: 201 });
  });

  it("injects failures and delays for matching requests", async () => {
    const remove = api.inject({ verb: "list", resource: "pods", user: "watcher", status: 503, times: 1 });
    const err = await rejection(core.listNamespacedPod({ namespace: "default" }));
    expect(statusOf(err)).toMatchObject({ kind: "Status", reason: "ServiceUnavailable", code: 503 });
    await core.listNamespacedPod({ namespace: "default" }); // `times: 1` used up
    remove();
    const slow = api.inject({ verb: "get", delayMs: 150 });
    const t0 = performance.now();
    await rejection(core.readNamespacedPod({ namespace: "default", name: "no-such-pod" }));
    expect(performance.now() - t0).toBeGreaterThanOrEqual(140);
    slow();
  });

  it("with podTerminationMs, a bound pod terminates gracefully: deletionTimestamp first, gone later", async () => {
    const kubelet = await startApiServer({ crds: [], podTerminationMs: 300 });
    try {
      const c = kubelet.kubeConfig().makeApiClient(CoreV1Api);
      await c.createNamespacedPod({ namespace: "default", body: podBody("bound", { node: "n1" }) });
      await c.createNamespacedPod({ namespace: "default", body: podBody("forced", { node: "n1" }) });
      await c.createNamespacedPod({ namespace: "default", body: podBody("unbound") });
      const rv = (await c.listNamespacedPod({ namespace: "default" })).metadata?.resourceVersion;
      const events: string[] = [];
      const controller = await new Watch(kubelet.kubeConfig()).watch(
        "/api/v1/namespaces/default/pods",
        { resourceVersion: rv },
        (type, o) =>
          events.push(`${type} ${o.metadata.name}${o.metadata.deletionTimestamp ? " terminating" : ""}`),
        () => {},
      );
      controllers.push(controller);
      const t0 = performance.now();
      await c.deleteNamespacedPod({ namespace: "default", name: "bound" });
      const terminating = await c.readNamespacedPod({ namespace: "default", name: "bound" });
      expect(terminating.metadata?.deletionGracePeriodSeconds).toBe(30);
      // The kubelet still reports status while the pod terminates; that does not remove it early.
      await setPodRunning(c, "default", "bound", { phase: "Running" });
      await c.deleteNamespacedPod({ namespace: "default", name: "unbound" });
      await c.deleteNamespacedPod({ namespace: "default", name: "forced" });
      await c.deleteNamespacedPod({ namespace: "default", name: "forced", gracePeriodSeconds: 0 });
      await waitFor(() => events.includes("DELETED bound terminating"), { what: "the kubelet to finish" });
      expect(performance.now() - t0).toBeGreaterThanOrEqual(280);
      expect(events).toEqual([
        "MODIFIED bound terminating",
        "MODIFIED bound terminating",
        "DELETED unbound",
        "MODIFIED forced terminating",
        "DELETED forced terminating",
        "DELETED bound terminating",
      ]);
    } finally {
      await kubelet.stop();
    }
  });
});
