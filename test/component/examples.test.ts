/**
 * The examples are programs users copy: every one type-checks against the package's public
 * types, the one Pulumi.yaml names runs as the Pulumi CLI would run it (same Node
 * arguments, same entry-point resolution), with mocks in place of the engine, and the YAML
 * program uses only what the Pulumi plugin's schema has.
 */
import { execFile } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { renderManifests } from "../../component/index.ts";
import { type PackageSchema, type PropertySpec, pluginSource, sourceSchema } from "./plugin-schema.ts";
import { unwrapSecrets } from "./pulumi-mocks.ts";

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
    expect(ds.inputs.spec.template.spec.containers[0].env).toContainEqual({
      name: "HIVE_CALLBACK",
      valueFrom: { secretKeyRef: { name: "hive-agent-callback", key: "url" } },
    });
    expect(outputs).toEqual({ namespace: "hive-system", daemonSet: "hive-agent", policies: ["default"] });
    // The kubectl quick start (hive render --config examples/quickstart/hive.yaml) is the same monitor.
    const rendered = renderManifests(parse(readFileSync(join(root, project.main, "hive.yaml"), "utf8")), {
      instance: "hive",
      managedBy: "pulumi",
    });
    const applied = resources
      // biome-ignore lint/suspicious/noExplicitAny: recorded inputs
      .filter((r: any) => r.type.startsWith("kubernetes:"))
      // The callback Secret's data is registered as a secret: compare what the cluster receives.
      // biome-ignore lint/suspicious/noExplicitAny: recorded inputs
      .map((r: any) => unwrapSecrets(r.inputs));
    const key = (o: { kind: string; metadata: { name: string } }) => `${o.kind}/${o.metadata.name}`;
    expect(Object.fromEntries(applied.map((o: (typeof rendered)[0]) => [key(o), o]))).toEqual(
      Object.fromEntries(rendered.map((o) => [key(o), o])),
    );
  }, 60_000);
});

describe("examples/yaml/Pulumi.yaml", () => {
  const program = parse(readFileSync(join(root, "examples/yaml/Pulumi.yaml"), "utf8"));
  let schema: PackageSchema;
  beforeAll(async () => {
    schema = await sourceSchema();
  }, 120_000);

  /** Problems of `value` as the schema property `spec` at `at`: unknown names, missing required ones, wrong kinds. */
  function check(value: unknown, spec: PropertySpec, at: string): string[] {
    if (typeof value === "string" && /^\$\{[^}]+\}$/.test(value)) return []; // a reference, typed by its source
    if (spec.$ref) {
      const type = schema.types[spec.$ref.replace("#/types/", "")];
      if (!type) return [`${at}: ${spec.$ref} is not in the schema`];
      return checkObject(value, type.properties ?? {}, type.required ?? [], at);
    }
    if (spec.type === "array")
      return Array.isArray(value)
        ? value.flatMap((v, i) => check(v, spec.items ?? {}, `${at}[${i}]`))
        : [`${at}: not a list`];
    if (spec.type === "object") {
      if (value === null || typeof value !== "object") return [`${at}: not a map`];
      return Object.entries(value).flatMap(([k, v]) =>
        check(v, spec.additionalProperties ?? {}, `${at}.${k}`),
      );
    }
    const kind = spec.type === "integer" ? "number" : spec.type;
    return kind && typeof value !== kind ? [`${at}: ${JSON.stringify(value)} is not a ${spec.type}`] : [];
  }

  function checkObject(
    value: unknown,
    properties: Record<string, PropertySpec>,
    required: string[],
    at: string,
  ): string[] {
    if (value === null || typeof value !== "object") return [`${at}: not an object`];
    return [
      ...required.filter((r) => !(r in value)).map((r) => `${at}.${r}: required`),
      ...Object.entries(value).flatMap(([k, v]) => {
        const spec = properties[k];
        return spec ? check(v, spec, `${at}.${k}`) : [`${at}.${k}: not in the schema`];
      }),
    ];
  }

  it("names the plugin of this repository as its hive package", () => {
    expect(program.runtime).toBe("yaml");
    expect(join(root, "examples/yaml", program.packages.hive)).toBe(pluginSource);
  });

  it("uses resource types, properties and outputs that the plugin's schema has", () => {
    const resources = Object.entries(
      program.resources as Record<string, { type: string; properties: unknown }>,
    );
    expect(resources.map(([, r]) => r.type).sort()).toEqual([
      "hive:index:HiveMonitor",
      "hive:index:HivePolicy",
    ]);
    const problems = resources.flatMap(([name, r]) => {
      const resource = schema.resources[r.type];
      if (!resource) return [`${name}: ${r.type} is not in the schema`];
      return checkObject(r.properties, resource.inputProperties ?? {}, resource.requiredInputs ?? [], name);
    });
    for (const value of Object.values(program.outputs as Record<string, string>)) {
      const [, name = "", output = ""] = /^\$\{(\w+)\.(\w+)\}$/.exec(value) ?? [];
      const type = (program.resources[name] as { type: string } | undefined)?.type ?? "";
      if (!schema.resources[type]?.properties?.[output]) problems.push(`outputs: ${value} is not an output`);
    }
    expect(problems).toEqual([]);
  });

  it("is caught when it names a property the schema lacks", () => {
    const monitor = schema.resources["hive:index:HiveMonitor"];
    const wrong = { image: "x", traps: [{ path: "/a", match: { containerNames: "x" } }] };
    expect(checkObject(wrong, monitor?.inputProperties ?? {}, [], "monitor")).toEqual([
      "monitor.traps[0].match.containerNames: not in the schema",
    ]);
  });
});
