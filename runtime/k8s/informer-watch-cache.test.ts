/**
 * The informer against a real kube-apiserver with its watch cache, as clusters run it: the first
 * LIST is the cache's answer, and bookmarks (which only the watch cache sends) keep a quiet
 * informer's resourceVersion recent. informer.test.ts runs without the cache, where etcd's own
 * answers give the 410s of a compacted history.
 */
import { CoreV1Api, type KubernetesObject, type V1Pod } from "@kubernetes/client-node";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type RealApi, startRealApi } from "../../test/cluster/real-api.ts";
import { podBody, waitFor } from "../../test/cluster/testing.ts";
import { createLogger } from "../log.ts";
import { Informer, type InformerOptions } from "./informer.ts";
import { createKubeClients } from "./kube-client.ts";

let api: RealApi;
let core: CoreV1Api;
const running: Informer<KubernetesObject>[] = [];
const quiet = createLogger({}, { level: "error", sink: () => {} });

function podInformer(namespace: string, user: string, extra: Partial<InformerOptions<V1Pod>> = {}) {
  // Its own user (impersonated by the proxy, all rights): its requests are told apart by it.
  const kubeConfig = api.kubeConfig({ username: user, groups: ["system:masters"] });
  const informer = new Informer<V1Pod>({
    clients: createKubeClients({ kubeConfig }),
    resource: { group: "", version: "v1", plural: "pods", namespace },
    backoff: { baseMs: 20, maxMs: 200 },
    logger: quiet,
    ...extra,
  });
  running.push(informer as Informer<KubernetesObject>);
  return informer;
}

async function namespaceWithPods(ns: string, count: number) {
  await core.createNamespace({ body: { metadata: { name: ns } } });
  for (let i = 0; i < count; i++)
    await core.createNamespacedPod({ namespace: ns, body: podBody(`p${String(i).padStart(3, "0")}`) });
}

beforeAll(async () => {
  api = await startRealApi();
  core = api.kubeConfig().makeApiClient(CoreV1Api);
});
afterEach(async () => {
  await Promise.all(running.splice(0).map((i) => i.stop()));
});
afterAll(async () => {
  await api?.stop();
});

describe("Informer with the API server's watch cache", () => {
  it("asks for any version first, which the watch cache answers whole in one request, not etcd", async () => {
    await namespaceWithPods("cache-first", 25);
    const informer = podInformer("cache-first", "first", { pageSize: 10 });
    await informer.start();
    expect(informer.list()).toHaveLength(25);
    // The cache serves resourceVersion=0 from memory and ignores the page size: one request.
    const lists = api.requests.filter((r) => r.user === "first" && r.verb === "list");
    expect(lists.map((r) => new URLSearchParams(r.query).get("resourceVersion"))).toEqual(["0"]);
    expect(lists[0]?.query).toContain("limit=10");
    expect(informer.stats.listPages).toBe(1);
  });

  it("advances its resourceVersion from bookmarks, so a quiet informer resumes from a recent version without re-listing", async () => {
    await namespaceWithPods("inf-quiet", 1);
    // A short watch timeout: the server sends a bookmark two seconds before each watch ends.
    const informer = podInformer("inf-quiet", "quiet", { watchTimeoutSeconds: 3 });
    await informer.start();
    const listed = Number(informer.resourceVersion());
    // Other resources move the cluster's resourceVersion; this informer sees no events.
    let latest = 0;
    for (let i = 0; i < 3; i++) {
      const cm = await core.createNamespacedConfigMap({
        namespace: "inf-quiet",
        body: { metadata: { name: `cm${i}` } },
      });
      latest = Number(cm.metadata?.resourceVersion);
    }
    // The pods cache learns of etcd's newer revision when a reader needs it, here another client's
    // consistent LIST of pods (in a cluster also etcd's periodic progress notifications).
    await core.listPodForAllNamespaces();
    await waitFor(() => Number(informer.resourceVersion()) >= latest, {
      timeoutMs: 15_000,
      what: "a bookmark",
    });
    expect(listed).toBeLessThan(latest);
    // etcd compacts its history; the informer's connection is cut and comes back.
    await api.compact();
    const cutAt = Date.now();
    await api.restart();
    await core.createNamespacedPod({ namespace: "inf-quiet", body: podBody("after") });
    await waitFor(() => informer.get("after", "inf-quiet") !== undefined, { what: "the new pod" });
    expect(informer.stats.relists).toBe(0);
    expect(api.countRequests({ user: "quiet", verb: "list" })).toBe(1);
    // The watch after the cut resumed from the bookmarked version, not from the list's.
    const resumed = api.requests.find((r) => r.user === "quiet" && r.verb === "watch" && r.time >= cutAt);
    expect(Number(new URLSearchParams(resumed?.query).get("resourceVersion"))).toBeGreaterThanOrEqual(latest);
  });
});
