/**
 * The component as a user runs it: the real Pulumi CLI and engine (local file backend) and the real
 * Kubernetes provider apply the quickstart program to a real control plane; then an update (a trap
 * added, the callback rotated), an `up` with nothing to do, and a destroy that keeps the CRDs.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  AdmissionregistrationV1Api,
  ApiextensionsV1Api,
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
} from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GROUP, PLURAL_POLICY, VERSION } from "../../api/meta.ts";
import { type ControlPlane, startControlPlane } from "../cluster/control-plane.ts";
import { pulumiRun } from "../cluster/pulumi.ts";
import type { RunRequest } from "../cluster/pulumi-run.ts";
import { waitFor } from "../cluster/testing.ts";

const root = join(import.meta.dirname, "../..");
const QUICKSTART = join(root, "examples/quickstart/index.ts");
const TWO_TRAPS = join(import.meta.dirname, "fixtures/quickstart-two-traps.ts");

describe("pulumi up of the quickstart against a real control plane", () => {
  let cp: ControlPlane;
  let workDir: string;
  let stackRun: (op: RunRequest["op"], program: string, callbackUrl: string) => ReturnType<typeof pulumiRun>;
  beforeAll(async () => {
    cp = await startControlPlane();
    workDir = mkdtempSync(join(tmpdir(), "hive-pulumi-"));
    stackRun = (op, program, callbackUrl) =>
      pulumiRun(cp, {
        op,
        program,
        workDir,
        stack: "dev",
        project: "hive-quickstart",
        config: {
          "hive:image": { value: "hive:test" },
          "hive:callbackUrl": { value: callbackUrl, secret: true },
        },
      });
  }, 180_000);
  afterAll(async () => {
    await cp?.stop();
    if (workDir) rmSync(workDir, { recursive: true, force: true });
  });

  const clients = () => {
    const kc = cp.adminKubeConfig();
    return {
      core: kc.makeApiClient(CoreV1Api),
      apps: kc.makeApiClient(AppsV1Api),
      ext: kc.makeApiClient(ApiextensionsV1Api),
      custom: kc.makeApiClient(CustomObjectsApi),
      admission: kc.makeApiClient(AdmissionregistrationV1Api),
    };
  };
  const callbackOf = async () => {
    const secret = await clients().core.readNamespacedSecret({
      name: "hive-agent-callback",
      namespace: "hive-system",
    });
    return Buffer.from(secret.data?.url ?? "", "base64").toString("utf8");
  };
  const trapPaths = async () => {
    const policy = (await clients().custom.getNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: "hive-system",
      plural: PLURAL_POLICY,
      name: "default",
    })) as { spec: { traps: { path: string }[] } };
    return policy.spec.traps.map((t) => t.path);
  };

  it("creates the CRDs, the agent's namespace, RBAC, admission, Secret, DaemonSet and HivePolicy", async () => {
    const r = await stackRun("up", QUICKSTART, "https://alerts-a.example/hive");
    expect(r.outputs).toEqual({ namespace: "hive-system", daemonSet: "hive-agent", policies: ["default"] });
    expect(r.changes.create).toBeGreaterThan(10);
    const c = clients();
    const crd = await c.ext.readCustomResourceDefinition({ name: `${PLURAL_POLICY}.${GROUP}` });
    expect(crd.status?.conditions?.find((x) => x.type === "Established")?.status).toBe("True");
    expect(
      (await c.apps.readNamespacedDaemonSet({ name: "hive-agent", namespace: "hive-system" })).spec?.template
        .spec?.containers[0]?.image,
    ).toBe("hive:test");
    expect(await trapPaths()).toEqual(["/etc/shadow"]);
    expect(await callbackOf()).toBe("https://alerts-a.example/hive");
    const policies = await c.admission.listValidatingAdmissionPolicy();
    expect(policies.items.length).toBeGreaterThan(0);
  }, 600_000);

  it("shows no changes when nothing changed", async () => {
    const r = await stackRun("preview", QUICKSTART, "https://alerts-a.example/hive");
    const changed = Object.entries(r.changes).filter(([op, n]) => op !== "same" && n > 0);
    expect(changed, r.stdout).toEqual([]);
  }, 600_000);

  it("updates in place: a trap added and the callback rotated reach the cluster", async () => {
    const r = await stackRun("up", TWO_TRAPS, "https://alerts-b.example/hive");
    expect(r.changes.update).toBeGreaterThan(0);
    expect(r.changes.delete ?? 0).toBe(0);
    expect(await trapPaths()).toEqual(["/etc/shadow", "/etc/gshadow"]);
    expect(await callbackOf()).toBe("https://alerts-b.example/hive");
    const again = await stackRun("preview", TWO_TRAPS, "https://alerts-b.example/hive");
    expect(
      Object.entries(again.changes).filter(([op, n]) => op !== "same" && n > 0),
      again.stdout,
    ).toEqual([]);
  }, 600_000);

  it("destroy removes the agent, its RBAC and admission, and keeps the CRDs", async () => {
    const r = await stackRun("destroy", TWO_TRAPS, "https://alerts-b.example/hive");
    expect(r.changes.delete).toBeGreaterThan(10);
    const c = clients();
    await waitFor(
      async () =>
        (await c.core.readNamespace({ name: "hive-system" }).then(
          () => false,
          () => true,
        )) || undefined,
      {
        timeoutMs: 60_000,
        intervalMs: 500,
        what: "namespace hive-system gone",
      },
    );
    const vaps = await c.admission.listValidatingAdmissionPolicy();
    expect(vaps.items.filter((p) => p.metadata?.name?.startsWith("hive"))).toEqual([]);
    const roles = await clients().core.listNamespace();
    expect(roles.items.map((n) => n.metadata?.name)).not.toContain("hive-system");
    expect(
      (await c.ext.readCustomResourceDefinition({ name: `${PLURAL_POLICY}.${GROUP}` })).metadata?.name,
    ).toBe(`${PLURAL_POLICY}.${GROUP}`);
  }, 600_000);
});
