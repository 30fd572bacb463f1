/**
 * Hive for Python, Go, .NET and YAML: the Pulumi plugin in `plugin/` serves HiveMonitor and
 * HivePolicy through @pulumi/pulumi's component provider, whose GetSchema runs here offline,
 * with the plugin loaded as the Pulumi CLI's Node.js host loads it. Every TypeScript option has
 * its counterpart in the schema, under the same name.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { MONITOR_OPTIONS } from "../../component/args.ts";
import { ALLOW_KEYS, MATCH_KEYS, TRAP_KEYS } from "../../component/builders/traps.ts";
import { type PackageSchema, PLUGIN_COMPONENTS, pluginSource, root, sourceSchema } from "./plugin-schema.ts";

const manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
const pluginManifest = JSON.parse(readFileSync(join(pluginSource, "package.json"), "utf8"));
let schema: PackageSchema;

beforeAll(async () => {
  schema = await sourceSchema();
}, 120_000);

const keys = (o: object | undefined) => Object.keys(o ?? {}).sort();

describe("the Pulumi plugin", () => {
  it("is a Node.js plugin whose entry point is JavaScript, serving package hive at the package's version", () => {
    const plugin = parse(readFileSync(join(pluginSource, "PulumiPlugin.yaml"), "utf8"));
    // Only what Pulumi documents for a plugin: the runtime's name, no options.
    expect(plugin).toEqual({ runtime: "nodejs" });
    expect(pluginManifest.main).toBe("index.js");
    expect(pluginManifest.type).toBe("commonjs");
    // The components come from the package the plugin sits in, never from a registry.
    expect(pluginManifest.dependencies).toBeUndefined();
    expect(pluginManifest.version).toBe(manifest.version);
    expect(schema.name).toBe("hive");
    expect(schema.version).toBe(manifest.version);
  });

  it("runs index.js and reads the schema from index.ts, both taking the same classes from the package", () => {
    const js = readFileSync(join(pluginSource, "index.js"), "utf8");
    const ts = readFileSync(join(pluginSource, "index.ts"), "utf8");
    const exported = (text: string, re: RegExp) =>
      [...text.matchAll(re)].flatMap((m) => (m[1] ?? "").split(",").map((n) => n.trim())).sort();
    expect(exported(js, /module\.exports = \{([^}]*)\}/g)).toEqual(["HiveMonitor", "HivePolicy"]);
    expect(exported(ts, /export \{([^}]*)\} from/g)).toEqual(["HiveMonitor", "HivePolicy"]);
    expect(js).toContain(`require("${PLUGIN_COMPONENTS}")`);
    expect(ts).toContain(`from "${PLUGIN_COMPONENTS}"`);
    // The package ships the plugin beside the dist/ that `..` names.
    expect(manifest.files).toContain("plugin");
  });

  it("lists HiveMonitor with every TypeScript option as an input, image required, and its outputs", () => {
    const monitor = schema.resources["hive:index:HiveMonitor"];
    expect(monitor?.isComponent).toBe(true);
    // namespace: { existing } is the one TypeScript form that becomes an input of its own.
    expect(keys(monitor?.inputProperties)).toEqual([...MONITOR_OPTIONS, "existingNamespace"].sort());
    expect(monitor?.requiredInputs).toEqual(["image"]);
    expect(keys(monitor?.properties)).toEqual(["daemonSetName", "namespace", "policyNames"]);
    expect(monitor?.properties?.policyNames).toMatchObject({ type: "array", items: { type: "string" } });
    // What decides which resources exist stays a plain value, as in TypeScript.
    for (const option of [
      "traps",
      "admissionPolicy",
      "priorityClassQuota",
      "podMonitor",
      "prometheusRule",
      "grafanaDashboard",
      "deleteCrdsOnDestroy",
    ])
      expect(monitor?.inputProperties?.[option]?.plain, option).toBe(true);
    expect(monitor?.inputProperties?.image?.plain).toBeUndefined();
    expect(monitor?.inputProperties?.callback?.$ref).toBe("#/types/hive:index:Callback");
  });

  it("lists HivePolicy with its inputs and outputs", () => {
    const policy = schema.resources["hive:index:HivePolicy"];
    expect(policy?.isComponent).toBe(true);
    expect(keys(policy?.inputProperties)).toEqual(["labels", "name", "namespace", "traps"]);
    expect(policy?.requiredInputs?.sort()).toEqual(["namespace", "traps"]);
    expect(keys(policy?.properties)).toEqual(["namespace", "policyName"]);
    expect(policy?.inputProperties?.traps?.items?.$ref).toBe("#/types/hive:index:Trap");
  });

  it("describes traps with the TypeScript options, each in one form", () => {
    const type = (name: string) => schema.types[`hive:index:${name}`];
    expect(keys(type("Trap")?.properties)).toEqual([...TRAP_KEYS].sort());
    expect(keys(type("MonitorTrap")?.properties)).toEqual([...TRAP_KEYS, "policy"].sort());
    expect(keys(type("TrapMatch")?.properties)).toEqual([...MATCH_KEYS].sort());
    expect(keys(type("Allow")?.properties)).toEqual([...ALLOW_KEYS].sort());
    expect(type("Trap")?.required).toEqual(["path"]);
    expect(type("Trap")?.properties?.mode?.type).toBe("string");
    expect(type("TrapMatch")?.properties?.containerName?.type).toBe("string");
    expect(keys(type("Callback")?.properties)).toEqual([
      "format",
      "headersSecret",
      "signingSecret",
      "url",
      "urlSecret",
    ]);
  });

  it("documents every resource, input and output", () => {
    for (const [token, resource] of Object.entries(schema.resources)) {
      expect(resource.description, token).toBeTruthy();
      for (const [name, p] of Object.entries({ ...resource.inputProperties, ...resource.properties }))
        expect(p.description, `${token} ${name}`).toBeTruthy();
    }
  });
});
