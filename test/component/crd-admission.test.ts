/**
 * Tenant input that would escalate or stall, written through the API stand-in with Hive's CRDs
 * installed: the CRD's schema and CEL rules refuse it at admission (422 Invalid, field named),
 * before any agent reads it.
 */
import { CoreV1Api, CustomObjectsApi } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServer, startApiServer } from "../apiserver/server.ts";
import { rejection, statusOf } from "../apiserver/testing.ts";

let api: ApiServer;
let custom: CustomObjectsApi;
const POLICIES = {
  group: "hive-operator.com",
  version: "v1alpha1",
  plural: "hivepolicies",
  namespace: "team-a",
};

function policy(name: string, trap: Record<string, unknown>) {
  return {
    apiVersion: "hive-operator.com/v1alpha1",
    kind: "HivePolicy",
    metadata: { name },
    spec: { traps: [trap] },
  };
}

beforeAll(async () => {
  api = await startApiServer();
  const kc = api.kubeConfig();
  custom = kc.makeApiClient(CustomObjectsApi);
  await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: "team-a" } } });
});
afterAll(async () => {
  await api.stop();
});

describe("a HivePolicy written through the API server", () => {
  it.each([
    ["setuid", 4755],
    ["world-writable", "0666"],
  ])("is refused with a %s create mode, the field named", async (name, mode) => {
    const err = await rejection(
      custom.createNamespacedCustomObject({
        ...POLICIES,
        body: policy(`mode-${name}`, { path: "/etc/ld.so.preload", create: true, mode }),
      }),
    );
    const status = statusOf(err);
    expect(status).toMatchObject({ reason: "Invalid", code: 422 });
    expect(status.message).toContain(
      "spec.traps[0].mode: Invalid value: mode must not set setuid, setgid, sticky or world-writable bits",
    );
  });

  it("is admitted with a read-only or owner-writable create mode", async () => {
    for (const mode of [644, "0444"]) {
      await custom.createNamespacedCustomObject({
        ...POLICIES,
        body: policy(`mode-${mode}`, { path: "/etc/app.conf", create: true, mode }),
      });
    }
  });

  it("is refused with a container-name that is no regular expression, the field named", async () => {
    const err = await rejection(
      custom.createNamespacedCustomObject({
        ...POLICIES,
        body: policy("bad-regex", { path: "/etc/shadow", match: { "container-name": "(" } }),
      }),
    );
    const status = statusOf(err);
    expect(status).toMatchObject({ reason: "Invalid", code: 422 });
    expect(status.message).toContain(
      "spec.traps[0].match.container-name: Invalid value: container-name must be a regular expression RE2 accepts",
    );
  });
});
