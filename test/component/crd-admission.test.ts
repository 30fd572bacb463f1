/**
 * Tenant input that would escalate or stall, written through a real kube-apiserver with Hive
 * installed from its rendered manifests: the CRD's schema and CEL rules refuse it at admission
 * (422 Invalid, the field named in the cause), before anything is stored for an agent to read.
 */
import { CoreV1Api, CustomObjectsApi } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { installHive } from "../cluster/install.ts";
import { type RealApi, startRealApi } from "../cluster/real-api.ts";
import { rejection, statusOf } from "../cluster/testing.ts";

let api: RealApi;
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

/** The 422 of a refused create: the causes the server lists, and that nothing was stored. */
async function refusal(name: string, trap: Record<string, unknown>) {
  const status = statusOf(
    await rejection(custom.createNamespacedCustomObject({ ...POLICIES, body: policy(name, trap) })),
  );
  expect(status).toMatchObject({ reason: "Invalid", code: 422 });
  const stored = await rejection(custom.getNamespacedCustomObject({ ...POLICIES, name }));
  expect(statusOf(stored).code).toBe(404);
  return {
    message: status.message ?? "",
    causes: (status.details?.causes ?? []) as { field: string; message: string }[],
  };
}

beforeAll(async () => {
  api = await startRealApi({ controllerManager: false });
  installHive(api.cp, { image: "hive:test", namespace: "hive-system" });
  const kc = api.kubeConfig();
  custom = kc.makeApiClient(CustomObjectsApi);
  await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: "team-a" } } });
});
afterAll(async () => {
  await api?.stop();
});

describe("a HivePolicy written through the API server", () => {
  it.each([
    ["setuid", 4755, "4755"],
    ["world-writable", "0666", '"0666"'],
  ])("is refused with a %s create mode, the field named", async (name, mode, shown) => {
    const { message, causes } = await refusal(`mode-${name}`, {
      path: "/etc/ld.so.preload",
      create: true,
      mode,
    });
    expect(causes).toEqual([
      {
        reason: "FieldValueInvalid",
        field: "spec.traps[0].mode",
        message: `Invalid value: ${shown}: mode must not set setuid, setgid, sticky or world-writable bits (such as 4755 or 0666); use a mode such as 0644 or 0444`,
      },
    ]);
    expect(message).toContain(`spec.traps[0].mode: Invalid value: ${shown}: mode must not set setuid`);
  });

  it("is admitted with a read-only or owner-writable create mode", async () => {
    for (const mode of [644, "0444"]) {
      await custom.createNamespacedCustomObject({
        ...POLICIES,
        body: policy(`mode-${mode}`, { path: "/etc/app.conf", create: true, mode }),
      });
      const stored = (await custom.getNamespacedCustomObject({ ...POLICIES, name: `mode-${mode}` })) as {
        spec: { traps: { mode: unknown }[] };
      };
      expect(stored.spec.traps[0]?.mode).toBe(mode);
    }
  });

  it("is refused with a container-name that is no regular expression, the field named", async () => {
    const { causes } = await refusal("bad-regex", { path: "/etc/shadow", match: { "container-name": "(" } });
    expect(causes).toHaveLength(1);
    expect(causes[0]?.field).toBe("spec.traps[0].match.container-name");
    // A CEL rule that fails to evaluate refuses the object; the server names the RE2 error and the rule.
    expect(causes[0]?.message).toContain("error parsing regexp: missing closing ): `(`");
    expect(causes[0]?.message).toContain(
      "container-name must be a regular expression RE2 accepts (no backreferences or lookaround)",
    );
  });
});
