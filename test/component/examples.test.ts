/**
 * The examples are programs users copy: every one type-checks against the package's public
 * types, and the one Pulumi.yaml names runs as the Pulumi CLI would run it (same Node
 * arguments, same entry-point resolution), with mocks in place of the engine.
 */
import { execFile } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { renderManifests } from "../../component/index.ts";

const run = promisify(execFile);
const root = join(import.meta.dirname, "../..");
const bin = (name: string) => join(root, "node_modules/.bin", name);

describe("examples", () => {
  it("type-check with the repository's strict settings", async () => {
    const result = await run(bin("tsc"), ["-p", "examples/tsconfig.json"], { cwd: root }).catch((e) => e);
    expect(`${result.stdout}${result.stderr}`).toBe("");
    expect(result.code ?? 0).toBe(0);
  }, 120_000);
});

describe("Pulumi.yaml", () => {
  const project = parse(readFileSync(join(root, "Pulumi.yaml"), "utf8"));

  it("is a Node.js program whose main holds an index.ts entry point", () => {
    expect(project.runtime.name).toBe("nodejs");
    // Node 24 strips the types itself; ts-node is not a dependency.
    expect(project.runtime.options.typescript).toBe(false);
    expect(existsSync(join(root, project.main, "index.ts"))).toBe(true);
  });

  it("deploys the user story: /etc/shadow trapped in pods labelled security=high, alerts to a callback", async () => {
    const nodeArgs = String(project.runtime.options.nodeargs ?? "")
      .split(/\s+/)
      .filter(Boolean);
    const { stdout } = await run(
      process.execPath,
      [...nodeArgs, "test/component/fixtures/run-with-mocks.ts", join(project.main, "index.ts")],
      { cwd: root },
    );
    const { resources, outputs } = JSON.parse(stdout);
    // biome-ignore lint/suspicious/noExplicitAny: recorded inputs
    const byType = (t: string) => resources.filter((r: any) => r.type === t);
    expect(byType("hive:index:HiveMonitor")).toHaveLength(1);
    const [policy] = byType("kubernetes:hive-operator.com/v1alpha1:HivePolicy");
    expect(policy.inputs.spec.traps).toEqual([
      { path: "/etc/shadow", match: { matchLabels: { security: "high" } } },
    ]);
    const [ds] = byType("kubernetes:apps/v1:DaemonSet");
    expect(ds.inputs.spec.template.spec.containers[0].args).toContain("--default-callback");
    expect(outputs).toEqual({ namespace: "hive-system", daemonSet: "hive-agent", policies: ["default"] });
    // The kubectl quick start (hive render --config examples/quickstart/hive.yaml) is the same monitor.
    const rendered = renderManifests(parse(readFileSync(join(root, project.main, "hive.yaml"), "utf8")), {
      instance: "hive",
      managedBy: "pulumi",
    });
    // biome-ignore lint/suspicious/noExplicitAny: recorded inputs
    const applied = resources.filter((r: any) => r.type.startsWith("kubernetes:")).map((r: any) => r.inputs);
    const key = (o: { kind: string; metadata: { name: string } }) => `${o.kind}/${o.metadata.name}`;
    expect(Object.fromEntries(applied.map((o: (typeof rendered)[0]) => [key(o), o]))).toEqual(
      Object.fromEntries(rendered.map((o) => [key(o), o])),
    );
  }, 60_000);
});
