/**
 * One builder feeds both paths: the objects Pulumi would send to the cluster (the inputs
 * recorded under mocks) are exactly the objects `renderManifests` returns, and the YAML
 * `hive render` prints parses back to the same objects.
 */
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { HiveMonitor, type HiveMonitorArgs, renderManifests, renderYaml } from "../../component/index.ts";
import { FULL, MINIMAL } from "./configs.ts";
import {
  installMocks,
  kubernetesObjects,
  objectKey,
  resolve,
  settle,
  unwrapSecrets,
} from "./pulumi-mocks.ts";

const recorded = installMocks();

async function pulumiObjects(name: string, args: HiveMonitorArgs) {
  const monitor = new HiveMonitor(name, args);
  await resolve(monitor.policyNames);
  await resolve(monitor.daemonSetName);
  await settle(recorded);
  // What the cluster receives: the callback Secret's data is always wrapped as a Pulumi secret.
  return kubernetesObjects(recorded.filter((r) => r.name.startsWith(`${name}-`))).map(
    (r) => unwrapSecrets(r.inputs) as { kind: string },
  );
}

const byKey = (objects: { kind: string }[]) => Object.fromEntries(objects.map((o) => [objectKey(o), o]));

describe.each([
  ["minimal", MINIMAL],
  ["full", FULL],
])("the %s configuration", (name, args) => {
  it("gives Pulumi exactly the objects renderManifests returns", async () => {
    const applied = await pulumiObjects(name, args);
    const rendered = renderManifests(args, { instance: name, managedBy: "pulumi" });
    expect(applied).toHaveLength(rendered.length);
    expect(byKey(applied)).toEqual(byKey(rendered));
  });

  it("prints YAML documents that parse back to the same objects, in apply order", () => {
    const docs = parseAllDocuments(renderYaml(args)).map((d) => d.toJS());
    expect(docs).toEqual(renderManifests(args));
    const kinds = docs.map((d) => d.kind);
    // CRDs before the HivePolicies that are their instances; the agent after its permissions.
    expect(kinds.indexOf("CustomResourceDefinition")).toBeLessThan(kinds.indexOf("DaemonSet"));
    expect(kinds.lastIndexOf("ClusterRoleBinding")).toBeLessThan(kinds.indexOf("DaemonSet"));
    if (kinds.includes("HivePolicy"))
      expect(kinds.indexOf("DaemonSet")).toBeLessThan(kinds.indexOf("HivePolicy"));
  });
});
