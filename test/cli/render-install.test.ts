/**
 * The kubectl install as the README gives it, with the real kubectl against a real kube-apiserver
 * that serves Hive's kinds only once their CRDs exist: `hive render --only crds | kubectl apply
 * -f -`, `kubectl wait` for Established, then `hive render --skip-crds | kubectl apply -f -`. The
 * whole stream in one apply is shown to fail on a new cluster, so the two-step install is the one
 * documented.
 */
import { AppsV1Api, CoreV1Api, CustomObjectsApi } from "@kubernetes/client-node";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { GROUP, PLURAL_POLICY, VERSION } from "../../api/meta.ts";
import { linesOf, runKubectl } from "../cluster/kubectl-run.ts";
import { type RealApi, startRealApi } from "../cluster/real-api.ts";
import { rejection, waitFor } from "../cluster/testing.ts";
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
const CRD_NAMES = ["hivepolicies.hive-operator.com", "hivedata.hive-operator.com"];

let api: RealApi;
const kubectl = (args: string[], input?: string) => runKubectl(api.cp, args, input);

/** A HivePolicy create as the admin: the server's answer code (201, or 404 when the kind is not served). */
async function createPolicyCode(name: string): Promise<number> {
  const custom = api.kubeConfig().makeApiClient(CustomObjectsApi);
  const body = {
    apiVersion: "hive-operator.com/v1alpha1",
    kind: "HivePolicy",
    metadata: { name },
    spec: { traps: [{ path: "/etc/shadow" }] },
  };
  const created = custom.createNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace: "default",
    plural: PLURAL_POLICY,
    body,
  });
  return created.then(
    () => 201,
    // An unserved kind's path is answered 404 with a plain-text body, not a Status.
    (err: unknown) => (err as { code?: number }).code ?? 0,
  );
}

/**
 * The HivePolicies stored, as the admin lists them. Right after its CRD is created, the server
 * answers 429 ("storage is (re)initializing") until its cache of the new kind is ready: retried.
 */
const storedPolicies = () =>
  waitFor(
    async () => {
      try {
        const list = (await api
          .kubeConfig()
          .makeApiClient(CustomObjectsApi)
          .listClusterCustomObject({ group: GROUP, version: VERSION, plural: PLURAL_POLICY })) as {
          items: { metadata: { name: string } }[];
        };
        return list.items.map((p) => p.metadata.name).sort();
      } catch (err) {
        if ((err as { code?: number }).code === 429) return undefined;
        throw err;
      }
    },
    { timeoutMs: 30_000, intervalMs: 200, what: "a list of HivePolicies" },
  );

beforeAll(async () => {
  api = await startRealApi();
});
afterAll(async () => {
  await api?.stop();
});

describe("installing with kubectl from hive render", { timeout: 120_000 }, () => {
  beforeEach(async () => {
    // A new cluster: whatever an earlier test installed is deleted (its namespace finalized by
    // the controller manager, the CRDs and their objects gone), and Hive's kinds are not served.
    // The API server's finalizing of a CRD took over 90 s once on a CI machine busy with kernel
    // guests: the clean-up waits up to 240 s (the hooks' limit is 600).
    const run = kubectl(
      ["delete", "-f", "-", "--ignore-not-found", "--wait", "--timeout=240s"],
      await render(),
    );
    for (const line of linesOf(run.stderr))
      expect(line).toMatch(
        /^resource mapping not found for .*kind "HivePolicy"|^ensure CRDs are installed first$/,
      );
    // kubectl stops short of waiting when some documents failed to map: wait for the namespace here.
    const core = api.kubeConfig().makeApiClient(CoreV1Api);
    await waitFor(
      () =>
        core.readNamespace({ name: "hive-system" }).then(
          () => false,
          (err: unknown) => (err as { code?: number }).code === 404,
        ),
      { timeoutMs: 240_000, intervalMs: 200, what: "namespace hive-system finalized" },
    );
    await waitFor(async () => (await createPolicyCode("probe")) === 404, {
      timeoutMs: 30_000,
      intervalMs: 200,
      what: "Hive's kinds no longer served",
    });
  });

  it("refuses a HivePolicy before its CRD exists, as a real API server does", async () => {
    expect(await createPolicyCode("early")).toBe(404);
    const err = await rejection(
      api
        .kubeConfig()
        .makeApiClient(CustomObjectsApi)
        .listClusterCustomObject({ group: GROUP, version: VERSION, plural: PLURAL_POLICY }),
    );
    expect(err).toMatchObject({ code: 404, body: "404 page not found\n" });
  });

  it("cannot apply the whole stream in one kubectl apply on a new cluster, CRDs first or not", async () => {
    const all = await render();
    expect(kinds(all).indexOf("CustomResourceDefinition")).toBeLessThan(kinds(all).indexOf("HivePolicy"));
    const run = kubectl(["apply", "-f", "-"], all);
    expect(run.code).toBe(1);
    // kubectl maps every document before it writes any: the HivePolicies' kind was not served then.
    expect(linesOf(run.stderr)).toEqual(
      ["default", "app-secrets"].flatMap((name) => [
        `resource mapping not found for name: "${name}" namespace: "hive-system" from "STDIN": no matches for kind "HivePolicy" in version "hive-operator.com/v1alpha1"`,
        "ensure CRDs are installed first",
      ]),
    );
    expect(linesOf(run.stdout)).not.toContainEqual(expect.stringMatching(/^hivepolicy/));
    expect(await storedPolicies()).toEqual([]);
  });

  it("applies the CRDs, then the rest, each in one kubectl apply with no error", async () => {
    const crds = await render("--only", "crds");
    const rest = await render("--skip-crds");
    expect(new Set(kinds(crds))).toEqual(new Set(["CustomResourceDefinition"]));
    expect(kinds(rest)).not.toContain("CustomResourceDefinition");
    // Together, the two parts are the whole stream, in its order.
    expect([...kinds(crds), ...kinds(rest)].sort()).toEqual(kinds(await render()).sort());

    const first = kubectl(["apply", "-f", "-"], crds);
    expect(first).toMatchObject({ code: 0, stderr: "" });
    expect(linesOf(first.stdout)).toEqual(
      CRD_NAMES.map((n) => `customresourcedefinition.apiextensions.k8s.io/${n} created`),
    );
    const wait = kubectl([
      "wait",
      "--for=condition=Established",
      "--timeout=60s",
      ...CRD_NAMES.map((n) => `crd/${n}`),
    ]);
    expect(wait).toMatchObject({ code: 0, stderr: "" });
    const second = kubectl(["apply", "-f", "-"], rest);
    expect(second).toMatchObject({ code: 0, stderr: "" });
    const applied = linesOf(second.stdout);
    expect(applied).toHaveLength(kinds(rest).length);
    for (const line of applied) expect(line).toMatch(/ created$/);
    expect(await storedPolicies()).toEqual(["app-secrets", "default"]);
    const daemonSets = await api.kubeConfig().makeApiClient(AppsV1Api).listDaemonSetForAllNamespaces();
    expect(daemonSets.items.map((d) => d.metadata?.name)).toEqual(["hive-agent"]);

    // Applying both again (an upgrade, a GitOps resync) changes objects in place: nothing is
    // created anew and nothing fails. ("configured" is kubectl's word for a patch it sent: for
    // lists the server fills in defaults, and a Secret's stringData, it sends one every time.)
    for (const part of [crds, rest]) {
      const again = kubectl(["apply", "-f", "-"], part);
      expect(again).toMatchObject({ code: 0, stderr: "" });
      for (const line of linesOf(again.stdout)) expect(line).toMatch(/ (unchanged|configured)$/);
      // The server finds nothing to change: what is rendered does not drift from what it stores.
      expect(kubectl(["diff", "-f", "-"], part)).toMatchObject({ code: 0, stdout: "", stderr: "" });
    }
  });
});

describe("hive render's install flags", () => {
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
