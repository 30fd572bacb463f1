/**
 * The README's Python program, word for word, with the real Pulumi CLI and engine, the real
 * Kubernetes provider and Hive's plugin against a real control plane: the Python SDK generated from
 * the plugin's schema (what `pulumi package add` does), `pulumi up` creates the monitor, `pulumi
 * destroy` removes it and keeps the CRDs.
 *
 * The program runs through the Python Automation API's inline host (python/pulumi_run.py), the
 * plugin as the executable `pulumi-resource-hive` (plugin-provider.ts), and the SDK is written by
 * Pulumi's Python code generator called directly (go/pulumi-codegen), which `gen-sdk` reaches
 * through the Python language host: the Go module proxy here serves neither
 * `pulumi-language-python` nor `pulumi-language-nodejs`.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ApiextensionsV1Api, AppsV1Api } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GROUP, PLURAL_POLICY } from "../../api/meta.ts";
import { binaryPath } from "../cluster/binaries.ts";
import { type ControlPlane, startControlPlane } from "../cluster/control-plane.ts";
import { pluginShim } from "../cluster/plugin-provider.ts";
import { pulumiEnv, runOrExplain } from "../cluster/pulumi.ts";
import { ensurePythonEnv } from "../cluster/python-env.ts";
import { root, stagePluginSources } from "./plugin-schema.ts";

const PROJECT = "hive-python";

/** The README's ```python block. */
function readmeProgram(): string {
  const block = /```python\n([\s\S]*?)```/.exec(readFileSync(join(root, "README.md"), "utf8"));
  if (!block?.[1]) throw new Error("README.md has no ```python block");
  return block[1];
}

describe("the README's Python program with the real Pulumi CLI", () => {
  let cp: ControlPlane;
  let work: string;
  let env: NodeJS.ProcessEnv;
  let python: string;
  const sh = (command: string, args: string[]) => runOrExplain(command, args, { cwd: work, env });
  const stack = async (op: "up" | "destroy") => {
    const request = {
      op,
      program: join(work, "__main__.py"),
      workDir: work,
      backendDir: join(work, "state"),
      stack: "dev",
      project: PROJECT,
      config: { [`${PROJECT}:callbackUrl`]: { value: "https://alerts.example/hive", secret: true } },
    };
    const out = await sh(python, [join(root, "test/cluster/python/pulumi_run.py"), JSON.stringify(request)]);
    return JSON.parse(out.trim().split("\n").at(-1) ?? "{}") as { outputs: Record<string, unknown> };
  };

  beforeAll(async () => {
    python = join(ensurePythonEnv(), "bin/python");
    cp = await startControlPlane();
    work = mkdtempSync(join(tmpdir(), "hive-python-"));
    env = pulumiEnv(cp, work);
    const bin = pluginShim(join(work, "bin"), "hive", stagePluginSources(work));
    env.PATH = `${bin}:${env.PATH}`;
    env.PYTHONPATH = join(work, "site");
    // What `pulumi package add` does for a Python program: the schema from the plugin, the SDK from it.
    writeFileSync(
      join(work, "schema.json"),
      await sh("pulumi", ["package", "get-schema", join(bin, "pulumi-resource-hive")]),
    );
    await sh(binaryPath("pulumi-codegen"), [join(work, "schema.json"), join(work, "sdk")]);
    await sh(join(python, "../pip"), [
      "install",
      "--quiet",
      "--disable-pip-version-check",
      "--no-deps",
      "--no-build-isolation",
      "--target",
      join(work, "site"),
      join(work, "sdk"),
    ]);
    writeFileSync(join(work, "__main__.py"), readmeProgram());
    mkdirSync(join(work, "state"));
  }, 300_000);
  afterAll(async () => {
    await cp?.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it("pulumi up creates the monitor the program declares", async () => {
    const r = await stack("up");
    expect(r.outputs).toEqual({ daemonSet: "hive-agent" });
    const ds = await cp
      .adminKubeConfig()
      .makeApiClient(AppsV1Api)
      .readNamespacedDaemonSet({ name: "hive-agent", namespace: "hive-system" });
    expect(ds.spec?.template.spec?.containers[0]?.image).toBe("registry.example.com/hive:0.1.0");
  }, 600_000);

  it("pulumi destroy removes it and keeps the CRDs", async () => {
    await stack("destroy");
    const kc = cp.adminKubeConfig();
    const gone = await kc
      .makeApiClient(AppsV1Api)
      .readNamespacedDaemonSet({ name: "hive-agent", namespace: "hive-system" })
      .then(
        () => false,
        () => true,
      );
    expect(gone).toBe(true);
    const crd = await kc
      .makeApiClient(ApiextensionsV1Api)
      .readCustomResourceDefinition({ name: `${PLURAL_POLICY}.${GROUP}` });
    expect(crd.metadata?.name).toBe(`${PLURAL_POLICY}.${GROUP}`);
  }, 600_000);
});
