/** Client configuration and connection reuse, against the API stand-in. */
import type { CoreV1Api } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { clusterAdmin } from "../../test/apiserver/authn.ts";
import { type ApiServer, startApiServer } from "../../test/apiserver/server.ts";
import { isHiveError } from "../errors.ts";
import { createKubeClients, loadKubeConfig } from "./kube-client.ts";

let api: ApiServer;
beforeAll(async () => {
  api = await startApiServer();
});
afterAll(async () => {
  await api.stop();
});

describe("kube-client", () => {
  it("connects by URL and token; the token is the user the server sees", async () => {
    const { core } = createKubeClients({ url: api.url, token: api.token(clusterAdmin("node-7")) });
    await core.listNamespace();
    expect(api.requests.at(-1)).toMatchObject({ verb: "list", resource: "namespaces", user: "node-7" });
  });

  it("reuses connections across requests (client-node alone opens one per request)", async () => {
    const count = async (core: CoreV1Api) => {
      const before = api.connectionCount();
      for (let i = 0; i < 10; i++) await core.listNamespace();
      return api.connectionCount() - before;
    };
    const token = api.token("admin");
    const plain = createKubeClients({ url: api.url, token, shareConnections: false }).core;
    const shared = createKubeClients({ url: api.url, token }).core;
    expect(await count(plain)).toBe(10);
    expect(await count(shared)).toBeLessThanOrEqual(3);
  });

  it("reports a kubeconfig that cannot be loaded as ConfigInvalid", () => {
    let err: unknown;
    try {
      loadKubeConfig({ kubeconfigPath: "/nonexistent/kubeconfig" });
    } catch (e) {
      err = e;
    }
    expect(isHiveError(err, "ConfigInvalid")).toBe(true);
  });
});
