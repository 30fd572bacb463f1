/**
 * What the component renders installs into the stand-in as `kubectl apply` of `hive render`
 * would, the ResourceQuota admitting the agent's priority class included, and a client reads it
 * back through the REST API.
 */
import { CoreV1Api } from "@kubernetes/client-node";
import { afterEach, describe, expect, it } from "vitest";
import { installHive } from "./install.ts";
import { type ApiServer, startApiServer } from "./server.ts";

let api: ApiServer | undefined;
afterEach(async () => {
  await api?.stop();
  api = undefined;
});

describe("installing the rendered manifests", () => {
  it("stores every object of the default rendering, the priority class's ResourceQuota among them", async () => {
    api = await startApiServer();
    const installed = installHive(api, { image: "hive:test" });
    expect(installed.manifests.map((o) => o.kind)).toContain("ResourceQuota");
    const core = api.kubeConfig().makeApiClient(CoreV1Api);
    const quotas = await core.listNamespacedResourceQuota({ namespace: installed.namespace });
    expect(quotas.items.map((q) => q.metadata?.name)).toEqual(["hive-agent-priority"]);
    expect(quotas.items[0]?.spec?.scopeSelector?.matchExpressions).toEqual([
      { scopeName: "PriorityClass", operator: "In", values: ["system-node-critical"] },
    ]);
  });
});
