import { CoreV1Api } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { clusterAdmin } from "./authn.ts";
import { listSource } from "./list-source.ts";
import { type ApiServer, startApiServer } from "./server.ts";

const source = (query: string) => listSource(new URLSearchParams(query));

describe("where kube-apiserver would serve a LIST from", () => {
  it("reads from storage without a resourceVersion, with a continue token, an exact version or a paginated version", () => {
    expect(source("")).toBe("storage");
    expect(source("resourceVersion=")).toBe("storage");
    expect(source("limit=500")).toBe("storage");
    expect(source("limit=500&continue=abc")).toBe("storage");
    expect(source("resourceVersion=42&limit=500")).toBe("storage");
    expect(source("resourceVersion=42&resourceVersionMatch=Exact")).toBe("storage");
  });

  it("answers from the watch cache for resourceVersion=0 (limit or not) and a version without a limit", () => {
    expect(source("resourceVersion=0")).toBe("watch-cache");
    expect(source("resourceVersion=0&limit=500")).toBe("watch-cache");
    expect(source("resourceVersion=42")).toBe("watch-cache");
    expect(source("resourceVersion=42&resourceVersionMatch=NotOlderThan")).toBe("watch-cache");
  });

  describe("as the stand-in records it", () => {
    let api: ApiServer;
    beforeAll(async () => {
      api = await startApiServer({ crds: [] });
    });
    afterAll(async () => {
      await api.stop();
    });

    it("names each LIST's source and every request's user agent", async () => {
      const core = api.kubeConfig(clusterAdmin("node-a")).makeApiClient(CoreV1Api);
      await core.listPodForAllNamespaces({ resourceVersion: "0", limit: 500 });
      await core.listPodForAllNamespaces({ limit: 500 });
      const lists = api.requests.filter((r) => r.user === "node-a" && r.verb === "list");
      expect(lists.map((r) => r.listSource)).toEqual(["watch-cache", "storage"]);
      expect(lists.every((r) => r.userAgent !== "")).toBe(true);
    });
  });
});
