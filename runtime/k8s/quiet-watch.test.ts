/**
 * A watch on a quiet resource against a real kube-apiserver (its watch cache on, as in
 * production): the server writes nothing on such a watch between its BOOKMARKs, which come a
 * minute or two apart, so the client must not give up on a watch sooner than that. With
 * client-node's default 30 s inactivity timeout, every quiet watch of every agent was cut and
 * re-opened twice a minute; the server's own timeoutSeconds (300–600 s) is what ends a healthy one.
 */
import { CoreV1Api, type V1ConfigMap } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RealApi, startRealApi } from "../../test/cluster/real-api.ts";
import { createLogger } from "../log.ts";
import { Informer } from "./informer.ts";
import { createKubeClients, WATCH_INACTIVITY_TIMEOUT_MS } from "./kube-client.ts";

let api: RealApi;

beforeAll(async () => {
  api = await startRealApi({ controllerManager: false });
  await api
    .kubeConfig()
    .makeApiClient(CoreV1Api)
    .createNamespace({ body: { metadata: { name: "quiet" } } });
});
afterAll(async () => {
  await api?.stop();
});

describe("a watch on a quiet resource", () => {
  it("outlasts the server's bookmark interval", () => {
    // The server's watch cache sends a BOOKMARK about every minute, the first one later still.
    expect(WATCH_INACTIVITY_TIMEOUT_MS).toBeGreaterThan(120_000);
  });

  it("stays open for 70 s with nothing to deliver: one WATCH request, no re-open", async () => {
    const clients = createKubeClients({
      kubeConfig: api.kubeConfig({ username: "watcher", groups: ["system:masters"] }),
    });
    const informer = new Informer<V1ConfigMap>({
      clients,
      resource: { group: "", version: "v1", plural: "configmaps", namespace: "quiet" },
      logger: createLogger({}, { level: "error", sink: () => {} }),
    });
    try {
      await informer.start();
      await new Promise((r) => setTimeout(r, 70_000));
      expect(api.countRequests({ user: "watcher", verb: "watch" })).toBe(1);
      expect(informer.stats.watches).toBe(1);
      expect(informer.stats.errors).toBe(0);
    } finally {
      await informer.stop();
    }
  }, 120_000);
});
