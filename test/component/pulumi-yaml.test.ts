/**
 * The README's YAML program (examples/yaml/Pulumi.yaml) with the real Pulumi CLI, its YAML
 * language host (`pulumi-language-yaml`), the real Kubernetes provider and Hive's plugin, against a
 * real control plane: `pulumi up` creates the monitor and a team's HivePolicy, `pulumi destroy`
 * removes them and keeps the CRDs.
 *
 * One line differs from the example: its `packages: hive: ../../plugin` makes the engine start the
 * plugin through the Node.js language host, which the Go module proxy here does not serve. The
 * plugin is started instead as the executable `pulumi-resource-hive` (plugin-provider.ts), which
 * serves the same directory the same way.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ApiextensionsV1Api, AppsV1Api, CoreV1Api, CustomObjectsApi } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GROUP, PLURAL_POLICY, VERSION } from "../../api/meta.ts";
import { binaryDir } from "../cluster/binaries.ts";
import { type ControlPlane, startControlPlane } from "../cluster/control-plane.ts";
import { pluginShim } from "../cluster/plugin-provider.ts";
import { pulumiEnv, runOrExplain } from "../cluster/pulumi.ts";
import { root, stagePluginSources } from "./plugin-schema.ts";

describe("the README's YAML program with the real Pulumi CLI", () => {
  let cp: ControlPlane;
  let work: string;
  let pulumi: (...args: string[]) => Promise<string>;
  beforeAll(async () => {
    cp = await startControlPlane();
    work = mkdtempSync(join(tmpdir(), "hive-yaml-"));
    const program = join(work, "program");
    mkdirSync(program);
    const example = readFileSync(join(root, "examples/yaml/Pulumi.yaml"), "utf8");
    const withoutPackages = example.replace(/^packages:\n {2}hive: \.\.\/\.\.\/plugin\n/m, "");
    expect(withoutPackages).not.toBe(example);
    writeFileSync(join(program, "Pulumi.yaml"), withoutPackages);
    const env = pulumiEnv(cp, work);
    env.PATH = [
      pluginShim(join(work, "bin"), "hive", stagePluginSources(work)),
      binaryDir("pulumi-yaml"),
      env.PATH,
    ].join(":");
    env.PULUMI_BACKEND_URL = `file://${join(work, "state")}`;
    mkdirSync(join(work, "state"));
    pulumi = (...args) => runOrExplain("pulumi", [...args, "--non-interactive"], { cwd: program, env });
    await pulumi("stack", "init", "dev");
    await pulumi("config", "set", "image", "hive:test");
    await pulumi("config", "set", "--secret", "callbackUrl", "https://alerts.example/hive");
    // The team's namespace exists before its HivePolicy, as in a cluster the team already uses.
    await cp
      .adminKubeConfig()
      .makeApiClient(CoreV1Api)
      .createNamespace({ body: { metadata: { name: "payments" } } });
  }, 180_000);
  afterAll(async () => {
    await cp?.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it("pulumi up creates the monitor and the team's HivePolicy", async () => {
    await pulumi("up", "--yes", "--skip-preview");
    const outputs = JSON.parse(await pulumi("stack", "output", "--json")) as Record<string, unknown>;
    expect(outputs).toMatchObject({
      namespace: "hive-system",
      daemonSet: "hive-agent",
      policies: ["default"],
      teamPolicy: "payments",
    });
    const kc = cp.adminKubeConfig();
    const ds = await kc
      .makeApiClient(AppsV1Api)
      .readNamespacedDaemonSet({ name: "hive-agent", namespace: "hive-system" });
    expect(ds.spec?.template.spec?.containers[0]?.image).toBe("hive:test");
    const team = (await kc.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: "payments",
      plural: PLURAL_POLICY,
      name: "payments",
    })) as { spec: { traps: { path: string }[] } };
    expect(team.spec.traps.map((t) => t.path)).toEqual(["/app/config/credentials.json"]);
  }, 600_000);

  it("pulumi destroy removes them and keeps the CRDs", async () => {
    await pulumi("destroy", "--yes", "--skip-preview");
    const kc = cp.adminKubeConfig();
    const ds = await kc
      .makeApiClient(AppsV1Api)
      .readNamespacedDaemonSet({ name: "hive-agent", namespace: "hive-system" })
      .then(
        () => "present",
        () => "gone",
      );
    expect(ds).toBe("gone");
    const crd = await kc
      .makeApiClient(ApiextensionsV1Api)
      .readCustomResourceDefinition({ name: `${PLURAL_POLICY}.${GROUP}` });
    expect(crd.metadata?.name).toBe(`${PLURAL_POLICY}.${GROUP}`);
  }, 600_000);
});
