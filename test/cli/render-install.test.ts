/**
 * The kubectl install as the README gives it, on a new cluster: `hive render --only crds`, then
 * `hive render --skip-crds`, each applied once to an API server that serves Hive's kinds only
 * after their CRDs are created. The whole stream in one apply is shown to fail, as it does
 * with kubectl, so the two-step install is the one documented.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type ApiServer, startApiServer } from "../apiserver/index.ts";
import { kubectlApply } from "../apiserver/kubectl-apply.ts";
import { runHive } from "./run-hive.ts";

const config = `image: registry.example.com/hive:0.1.0
callback:
  url: https://alerts.example.com/hive
traps:
  - path: /etc/shadow
    match:
      matchLabels: { security: high }
  - policy: app-secrets
    path: /run/secrets/token
    match: { containerName: "api-.*" }
`;

async function render(...flags: string[]): Promise<string> {
  const run = await runHive(["render", "--config", "-", ...flags], { input: config });
  expect(run.stderr).toBe("");
  expect(run.code).toBe(0);
  return run.stdout;
}

const kinds = (yaml: string) => [...yaml.matchAll(/^kind: (\w+)$/gm)].map((m) => m[1]);

describe("installing with kubectl from hive render", { timeout: 60_000 }, () => {
  let api: ApiServer;
  beforeEach(async () => {
    api = await startApiServer({ crds: [] }); // a new cluster: no Hive kinds served yet
  });
  afterEach(() => api.stop());

  it("refuses a HivePolicy before its CRD exists, as a real API server does", async () => {
    const res = await fetch(`${api.url}/apis/hive-operator.com/v1alpha1/namespaces/default/hivepolicies`, {
      method: "POST",
      headers: { Authorization: `Bearer ${api.token("admin")}`, "Content-Type": "application/json" },
      body: JSON.stringify({
        apiVersion: "hive-operator.com/v1alpha1",
        kind: "HivePolicy",
        metadata: { name: "early" },
        spec: { traps: [{ path: "/etc/shadow" }] },
      }),
    });
    expect(res.status).toBe(404);
  });

  it("cannot apply the whole stream in one kubectl apply on a new cluster, CRDs first or not", async () => {
    const all = await render();
    expect(kinds(all).indexOf("CustomResourceDefinition")).toBeLessThan(kinds(all).indexOf("HivePolicy"));
    const result = await kubectlApply(api, all);
    expect(result.errors).toHaveLength(2);
    for (const e of result.errors)
      expect(e).toMatch(/no matches for kind "HivePolicy".*\nensure CRDs are installed first$/);
    expect(api.store.stored("hive-operator.com", "hivepolicies")).toEqual([]);
  });

  it("applies the CRDs, then the rest, each in one kubectl apply with no error", async () => {
    const crds = await render("--only", "crds");
    const rest = await render("--skip-crds");
    expect(new Set(kinds(crds))).toEqual(new Set(["CustomResourceDefinition"]));
    expect(kinds(rest)).not.toContain("CustomResourceDefinition");
    // Together, the two parts are the whole stream, in its order.
    expect([...kinds(crds), ...kinds(rest)].sort()).toEqual(kinds(await render()).sort());

    const first = await kubectlApply(api, crds);
    expect(first.errors).toEqual([]);
    expect(first.applied).toEqual([
      "customresourcedefinition/hivepolicies.hive-operator.com created",
      "customresourcedefinition/hivedata.hive-operator.com created",
    ]);
    const second = await kubectlApply(api, rest);
    expect(second.errors).toEqual([]);
    expect(second.applied).toHaveLength(kinds(rest).length);
    const policies = api.store.stored("hive-operator.com", "hivepolicies").map((p) => p.metadata.name);
    expect(policies.sort()).toEqual(["app-secrets", "default"]);
    expect(api.store.stored("apps", "daemonsets").map((d) => d.metadata.name)).toEqual(["hive-agent"]);

    // Applying both again (an upgrade, a GitOps resync) changes objects in place.
    expect((await kubectlApply(api, crds)).errors).toEqual([]);
    expect((await kubectlApply(api, rest)).errors).toEqual([]);
  });

  it("takes --only crds and --skip-crds one at a time, and only 'crds' after --only", async () => {
    const both = await runHive(["render", "--config", "-", "--only", "crds", "--skip-crds"], {
      input: config,
    });
    expect(both.stderr).toContain("--only crds and --skip-crds exclude each other");
    expect(both.code).toBe(2);
    const other = await runHive(["render", "--config", "-", "--only", "policies"], { input: config });
    expect(other.stderr).toContain('--only takes "crds", not "policies"');
    expect(other.code).toBe(2);
  });
});
