/**
 * The informer against a real kube-apiserver behind the fault proxy (real client-node): paginated
 * LIST, watch from the list's resourceVersion, resume after a dropped connection without a
 * re-list, re-list on 410 with an exact diff, continue-token expiry, errors with backoff,
 * handler failures, and custom resources with label selectors.
 *
 * The server runs without its watch cache, so lists and watches are etcd's own answers: after
 * `api.compact()`, a watch, a paginated list or a continue token from an older resourceVersion
 * gets etcd's 410, as it does from a real cluster whose history was compacted away. Bookmarks
 * come from the watch cache: informer-watch-cache.test.ts has those.
 */
import { CoreV1Api, CustomObjectsApi, type KubernetesObject, type V1Pod } from "@kubernetes/client-node";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { renderManifests } from "../../component/index.ts";
import { applyObjects } from "../../test/cluster/install.ts";
import { type RealApi, startRealApi } from "../../test/cluster/real-api.ts";
import { podBody, waitFor } from "../../test/cluster/testing.ts";
import { createLogger } from "../log.ts";
import { Informer, type InformerOptions } from "./informer.ts";
import { createKubeClients } from "./kube-client.ts";

let api: RealApi;
let core: CoreV1Api;
const running: Informer<KubernetesObject>[] = [];
const quiet = createLogger({}, { level: "error", sink: () => {} });

interface Recorder<T> {
  adds: string[];
  updates: string[];
  deletes: string[];
  handlers: NonNullable<InformerOptions<T>["handlers"]>;
}

function recorder<T extends KubernetesObject>(): Recorder<T> {
  const r: Recorder<T> = {
    adds: [],
    updates: [],
    deletes: [],
    handlers: {
      add: (o) => void r.adds.push(o.metadata?.name ?? ""),
      update: (o) => void r.updates.push(o.metadata?.name ?? ""),
      delete: (o) => void r.deletes.push(o.metadata?.name ?? ""),
    },
  };
  return r;
}

function podInformer(namespace: string, extra: Partial<InformerOptions<V1Pod>> = {}, user = "agent") {
  // Its own user (impersonated by the proxy, all rights): requests and faults are told apart by it.
  const clients = createKubeClients({
    kubeConfig: api.kubeConfig({ username: user, groups: ["system:masters"] }),
  });
  const informer = new Informer<V1Pod>({
    clients,
    resource: { group: "", version: "v1", plural: "pods", namespace },
    backoff: { baseMs: 20, maxMs: 200 },
    logger: quiet,
    ...extra,
  });
  running.push(informer as Informer<KubernetesObject>);
  return informer;
}

async function namespaceWithPods(ns: string, count: number, node = "node-a") {
  await core.createNamespace({ body: { metadata: { name: ns } } });
  for (let i = 0; i < count; i++) {
    await core.createNamespacedPod({
      namespace: ns,
      body: podBody(`p${String(i).padStart(3, "0")}`, { node }),
    });
  }
}

/** Deletes a pod at once: bound to a node with no kubelet, a graceful delete would wait for one. */
const deletePod = (client: CoreV1Api, namespace: string, name: string) =>
  client.deleteNamespacedPod({ namespace, name, gracePeriodSeconds: 0 });

beforeAll(async () => {
  api = await startRealApi({ watchCache: false });
  core = api.kubeConfig().makeApiClient(CoreV1Api);
  // The pods' nodes exist, so the pod garbage collector leaves their pods alone.
  for (const name of ["node-a", "node-b"]) await core.createNode({ body: { metadata: { name } } });
});
afterEach(async () => {
  await Promise.all(running.splice(0).map((i) => i.stop()));
});
afterAll(async () => {
  await api?.stop();
});

describe("Informer", () => {
  it("lists in pages of `pageSize` and delivers every object once", async () => {
    await namespaceWithPods("inf-pages", 25);
    await core.createNamespacedPod({
      namespace: "inf-pages",
      body: podBody("elsewhere", { node: "node-b" }),
    });
    const rec = recorder<V1Pod>();
    const informer = podInformer(
      "inf-pages",
      { pageSize: 10, fieldSelector: "spec.nodeName=node-a", handlers: rec.handlers },
      "pager",
    );
    await informer.start();
    expect(informer.list()).toHaveLength(25);
    expect(rec.adds).toHaveLength(25);
    expect(new Set(rec.adds).size).toBe(25);
    expect(informer.get("elsewhere", "inf-pages")).toBeUndefined();
    const lists = api.requests.filter((r) => r.user === "pager" && r.verb === "list");
    expect(lists).toHaveLength(3);
    expect(
      lists.every(
        (r) => r.query.includes("limit=10") && r.query.includes("fieldSelector=spec.nodeName%3Dnode-a"),
      ),
    ).toBe(true);
    expect(lists.filter((r) => r.query.includes("continue=")).length).toBe(2);
    // The first page asks for any version (the watch cache's, where there is one; etcd's latest
    // here); the continue token carries the snapshot's version after it.
    expect(new URLSearchParams(lists[0]?.query).get("resourceVersion")).toBe("0");
    expect(lists.slice(1).every((r) => !new URLSearchParams(r.query).has("resourceVersion"))).toBe(true);
    await waitFor(() => api.countRequests({ user: "pager", verb: "watch" }) === 1);
    const watchReq = api.requests.find((r) => r.user === "pager" && r.verb === "watch");
    expect(watchReq?.query).toContain("allowWatchBookmarks=true");
    expect(watchReq?.query).toContain(`resourceVersion=${informer.resourceVersion()}`);
  });

  it("applies watch events to the cache and hands the same model classes as the list", async () => {
    await namespaceWithPods("inf-watch", 1);
    const rec = recorder<V1Pod>();
    const informer = podInformer("inf-watch", { handlers: rec.handlers });
    await informer.start();
    await waitFor(() => api.watchCount() > 0);
    await core.createNamespacedPod({
      namespace: "inf-watch",
      body: podBody("added", { labels: { a: "1" } }),
    });
    await core.patchNamespacedPod({
      namespace: "inf-watch",
      name: "added",
      body: [{ op: "replace", path: "/metadata/labels/a", value: "2" }],
    });
    await deletePod(core, "inf-watch", "p000");
    await waitFor(() => rec.deletes.length === 1, { what: "the delete event" });
    expect(rec.adds).toEqual(["p000", "added"]);
    // A pod's deletion is graceful even at 0 seconds: the server first marks it (deletionTimestamp,
    // a MODIFIED event), then removes it (DELETED).
    expect(rec.updates).toEqual(["added", "p000"]);
    expect(rec.deletes).toEqual(["p000"]);
    const fromWatch = informer.get("added", "inf-watch");
    expect(fromWatch?.metadata?.labels).toEqual({ a: "2" });
    expect(fromWatch?.metadata?.creationTimestamp).toBeInstanceOf(Date);
    expect(fromWatch?.kind).toBe("Pod");
  });

  it("resumes from the last resourceVersion after the API server restarts, without re-listing", async () => {
    await namespaceWithPods("inf-restart", 3);
    const rec = recorder<V1Pod>();
    const informer = podInformer("inf-restart", { handlers: rec.handlers }, "restarter");
    await informer.start();
    await waitFor(() => api.countRequests({ user: "restarter", verb: "watch" }) === 1);
    const restarted = api.restart({ downtimeMs: 500 });
    // Writes while the informer is cut off (straight to the API server: the proxy is down).
    const direct = api.cp.adminKubeConfig().makeApiClient(CoreV1Api);
    await direct.createNamespacedPod({ namespace: "inf-restart", body: podBody("while-down") });
    await deletePod(direct, "inf-restart", "p001");
    await restarted;
    await waitFor(() => rec.deletes.includes("p001") && rec.adds.includes("while-down"), {
      what: "missed events",
    });
    expect(
      informer
        .list()
        .map((p) => p.metadata?.name)
        .sort(),
    ).toEqual(["p000", "p002", "while-down"]);
    expect(informer.stats.lists).toBe(1);
    expect(informer.stats.relists).toBe(0);
    expect(api.countRequests({ user: "restarter", verb: "list" })).toBe(1);
    // The new watch resumed from where the old one stopped, not from "now".
    const watches = api.requests.filter((r) => r.user === "restarter" && r.verb === "watch");
    expect(watches.length).toBeGreaterThanOrEqual(2);
    expect(watches[1]?.query).toContain(
      `resourceVersion=${watches[0]?.query.match(/resourceVersion=(\d+)/)?.[1]}`,
    );
  });

  it("re-lists on 410 Gone and reports exactly the changes it missed", async () => {
    await namespaceWithPods("inf-gone", 3);
    const rec = recorder<V1Pod>();
    const informer = podInformer("inf-gone", { handlers: rec.handlers }, "gone");
    await informer.start();
    // Held by the proxy, not only asked for: closeWatches ends only the watches it holds.
    await waitFor(() => api.watchCount({ user: "gone" }) === 1, { what: "the watch held" });
    rec.adds.length = 0;
    // Cut the informer's watches off while the world changes and etcd compacts its history away:
    // the watch then resumes from a compacted revision, and etcd answers 410.
    const cutOff = api.inject({ user: "gone", verb: "watch", status: 503 });
    api.closeWatches();
    // Its backoff after the cut: seconds on a loaded machine, half a minute beside three guests.
    await waitFor(() => api.countRequests({ user: "gone", verb: "watch" }) >= 2, {
      timeoutMs: 90_000,
      what: "the informer watching again",
    });
    await core.createNamespacedPod({ namespace: "inf-gone", body: podBody("new-one") });
    await core.patchNamespacedPod({
      namespace: "inf-gone",
      name: "p000",
      body: [{ op: "add", path: "/metadata/labels", value: { v: "2" } }],
    });
    await deletePod(core, "inf-gone", "p002");
    await api.compact();
    cutOff();
    await waitFor(() => informer.stats.relists === 1, { what: "a re-list" });
    await waitFor(() => rec.deletes.length === 1);
    expect(rec.adds).toEqual(["new-one"]);
    expect(rec.updates).toEqual(["p000"]);
    expect(rec.deletes).toEqual(["p002"]);
    expect(
      informer
        .list()
        .map((p) => p.metadata?.name)
        .sort(),
    ).toEqual(["new-one", "p000", "p001"]);
    expect(informer.stats.lists).toBe(2);
    // The re-list asks for the version last seen (a paginated read at a compacted revision: 410),
    // then makes a consistent read.
    const lists = api.requests.filter((r) => r.user === "gone" && r.verb === "list");
    expect(lists.map((r) => [r.code, new URLSearchParams(r.query).get("resourceVersion")])).toEqual([
      [200, "0"],
      [410, expect.stringMatching(/^[1-9]\d*$/)],
      [200, null],
    ]);
  }, 150_000);

  it("re-lists from the version it saw last when the server can still serve a list not older than it", async () => {
    await namespaceWithPods("inf-relist", 2);
    const rec = recorder<V1Pod>();
    // Unpaginated, as a real API server answers resourceVersion=0 from its watch cache: a list
    // "not older than" a version needs no history, only a watch does.
    const informer = podInformer("inf-relist", { handlers: rec.handlers, pageSize: 0 }, "relist");
    await informer.start();
    await waitFor(() => api.watchCount({ user: "relist" }) === 1, { what: "the watch held" });
    const seen = informer.resourceVersion();
    // Two writes elsewhere, then a compaction: a watch from `seen` (it starts at the revision
    // after it) is refused with 410, a list not older than `seen` is not.
    for (const name of ["moves-on-1", "moves-on-2"])
      await core.createNamespacedConfigMap({ namespace: "inf-relist", body: { metadata: { name } } });
    await api.compact();
    api.closeWatches();
    await waitFor(() => informer.stats.relists === 1, { what: "a re-list" });
    await waitFor(() => informer.stats.lists === 2, { what: "the re-list done" });
    const lists = api.requests.filter((r) => r.user === "relist" && r.verb === "list");
    expect(lists.map((r) => [r.code, new URLSearchParams(r.query).get("resourceVersion")])).toEqual([
      [200, "0"],
      [200, seen],
    ]);
  });

  it("resumes at once when a quiet watch ends at its timeout (no backoff)", async () => {
    await namespaceWithPods("inf-timeout", 1);
    const informer = podInformer(
      "inf-timeout",
      { watchTimeoutSeconds: 1, backoff: { baseMs: 5000, maxMs: 5000 } },
      "timeout",
    );
    await informer.start();
    // The server ends each watch after 1 s with no events; the next one must follow at once.
    await waitFor(() => api.countRequests({ user: "timeout", verb: "watch" }) >= 2, {
      timeoutMs: 2500,
      what: "a second watch",
    });
    expect(informer.stats.errors).toBe(0);
    expect(informer.stats.relists).toBe(0);
  });

  it("starts the backoff afresh after a watch that worked for a while", async () => {
    await namespaceWithPods("inf-fresh", 1);
    const failing = api.inject({ user: "fresh", verb: "watch", status: 500, times: 6 });
    const informer = podInformer("inf-fresh", { backoff: { baseMs: 20, maxMs: 5000 } }, "fresh");
    await informer.start();
    // Six failures in a row: the next delay would be 320–640 ms.
    await waitFor(
      () => api.requests.some((r) => r.user === "fresh" && r.verb === "watch" && r.code === 200),
      {
        timeoutMs: 5000,
        what: "a working watch",
      },
    );
    failing();
    await core.createNamespacedPod({ namespace: "inf-fresh", body: podBody("event") });
    await waitFor(() => informer.get("event", "inf-fresh") !== undefined);
    await new Promise((r) => setTimeout(r, 1100));
    const before = api.countRequests({ user: "fresh", verb: "watch" });
    const t0 = performance.now();
    await api.restart();
    await waitFor(() => api.countRequests({ user: "fresh", verb: "watch" }) > before, {
      what: "the resumed watch",
    });
    expect(performance.now() - t0).toBeLessThan(250);
  });

  it("falls back to one unpaginated LIST when a continue token expires mid-list", async () => {
    await namespaceWithPods("inf-expire", 6);
    const held = api.inject({
      user: "expire",
      verb: "list",
      // Long enough for a write and a compaction on a loaded machine.
      delayMs: 3000,
      times: 1,
      when: (r) => r.query.includes("continue="),
    });
    const informer = podInformer("inf-expire", { pageSize: 2 }, "expire");
    const started = informer.start();
    await waitFor(() => api.requests.some((r) => r.user === "expire" && r.query.includes("continue=")));
    await core.createNamespacedPod({ namespace: "inf-expire", body: podBody("later") }); // history moves on…
    await api.compact(); // …and etcd compacts it past the list's snapshot
    await started;
    held();
    expect(informer.list()).toHaveLength(7);
    const lists = api.requests.filter((r) => r.user === "expire" && r.verb === "list");
    expect(lists.map((r) => r.code)).toEqual([200, 410, 200]);
    expect(lists[2]?.query).not.toContain("limit=");
  });

  it("retries failed LISTs with backoff and never throws", async () => {
    await namespaceWithPods("inf-fail", 2);
    const fail = api.inject({ user: "flaky", verb: "list", status: 500, times: 3 });
    const informer = podInformer("inf-fail", {}, "flaky");
    await informer.start();
    fail();
    expect(informer.list()).toHaveLength(2);
    expect(informer.stats.errors).toBe(3);
    const times = api.requests.filter((r) => r.user === "flaky" && r.verb === "list").map((r) => r.time);
    expect(times).toHaveLength(4);
    // Backoff grows: base 20 ms, equal jitter → at least 10, 20, 40 ms between attempts.
    expect((times[3] ?? 0) - (times[0] ?? 0)).toBeGreaterThanOrEqual(70);
  });

  it("keeps going when a handler throws or rejects", async () => {
    await namespaceWithPods("inf-throw", 0);
    await waitFor(() => api.watchCount() === 0, { what: "earlier tests' watches to end" });
    const seen: string[] = [];
    const informer = podInformer("inf-throw", {
      handlers: {
        add: (p) => {
          seen.push(p.metadata?.name ?? "");
          if (p.metadata?.name === "bad") throw new Error("handler bug");
          if (p.metadata?.name === "worse") return Promise.reject(new Error("async handler bug"));
        },
      },
    });
    await informer.start();
    await waitFor(() => api.watchCount() > 0);
    for (const name of ["bad", "worse", "good"])
      await core.createNamespacedPod({ namespace: "inf-throw", body: podBody(name) });
    await waitFor(() => seen.length === 3);
    expect(seen).toEqual(["bad", "worse", "good"]);
    expect(informer.get("good", "inf-throw")).toBeDefined();
    // stop() closes the stream: the server sees the watch go away.
    const before = api.watchCount();
    await informer.stop();
    await waitFor(() => api.watchCount() === before - 1, { what: "the server to drop the watch" });
  });

  it("watches custom resources with a label selector", async () => {
    applyObjects(
      api.cp,
      renderManifests({ image: "hive:test" }).filter((o) => o.kind === "CustomResourceDefinition"),
    );
    const custom = api.kubeConfig().makeApiClient(CustomObjectsApi);
    await core.createNamespace({ body: { metadata: { name: "inf-cr" } } });
    const data = (name: string, kernel: string) => ({
      apiVersion: "hive-operator.com/v1alpha1",
      kind: "HiveData",
      metadata: { name, labels: { "hive-operator.com/kernel-id": kernel } },
      spec: {
        "inode-no": 42,
        "kernel-id": "0b5e2c8a-9a4e-4a8e-9d86-3c55d0c1d6a1",
        device: { major: 8, minor: 1 },
        accesses: ["read"],
      },
    });
    const G = { group: "hive-operator.com", version: "v1alpha1", plural: "hivedata", namespace: "inf-cr" };
    await custom.createNamespacedCustomObject({ ...G, body: data("mine-1", "k1") });
    await custom.createNamespacedCustomObject({ ...G, body: data("other", "k2") });
    const rec = recorder<KubernetesObject>();
    const informer = new Informer<KubernetesObject>({
      clients: createKubeClients({ kubeConfig: api.kubeConfig() }),
      resource: { group: "hive-operator.com", version: "v1alpha1", plural: "hivedata" },
      labelSelector: "hive-operator.com/kernel-id=k1",
      handlers: rec.handlers,
      logger: quiet,
    });
    running.push(informer);
    await informer.start();
    await custom.createNamespacedCustomObject({ ...G, body: data("mine-2", "k1") });
    await custom.createNamespacedCustomObject({ ...G, body: data("other-2", "k2") });
    await waitFor(() => rec.adds.length === 2);
    expect(rec.adds).toEqual(["mine-1", "mine-2"]);
    expect(
      informer
        .list()
        .map((o) => o.metadata?.name)
        .sort(),
    ).toEqual(["mine-1", "mine-2"]);
  });
});
