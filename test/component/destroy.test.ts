/**
 * What `pulumi destroy` does with a monitor, seen through the resource options every child is
 * registered with (a transformation on the component sees them as the engine would): the CRDs outlive the
 * monitor unless told otherwise, and its own HivePolicies go before the agent that removes
 * their finalizers.
 */
import type * as pulumi from "@pulumi/pulumi";
import { describe, expect, it } from "vitest";
import { HiveMonitor, type HiveMonitorArgs } from "../../component/index.ts";
import { MINIMAL } from "./configs.ts";
import { installMocks, resolve, settle } from "./pulumi-mocks.ts";

const recorded = installMocks();

interface Seen {
  type: string;
  name: string;
  retainOnDelete: boolean | undefined;
  dependsOn: string[];
}
const seen: Seen[] = [];

/** Sees every child's options as registered, changing nothing. */
const observe: pulumi.ResourceTransformation = (args) => {
  const dependsOn = ([] as pulumi.Resource[]).concat((args.opts.dependsOn as pulumi.Resource[]) ?? []);
  seen.push({
    type: args.type,
    name: args.name,
    retainOnDelete: args.opts.retainOnDelete,
    dependsOn: dependsOn.map((r) => (r as unknown as { __name: string }).__name),
  });
  return undefined;
};

async function run(name: string, args: HiveMonitorArgs): Promise<Seen[]> {
  const monitor = new HiveMonitor(name, args, { transformations: [observe] });
  await resolve(monitor.policyNames);
  await settle(recorded);
  return seen.filter((s) => s.name.startsWith(`${name}-`));
}

describe("pulumi destroy of a HiveMonitor", () => {
  it("keeps the CRDs (and so every team's HivePolicies) by default, and nothing else", async () => {
    const children = await run("keep", { ...MINIMAL, traps: [{ path: "/etc/shadow" }] });
    const crds = children.filter((c) => c.type.endsWith(":CustomResourceDefinition"));
    expect(crds.map((c) => c.retainOnDelete)).toEqual([true, true]);
    for (const c of children.filter((c) => !c.type.endsWith(":CustomResourceDefinition")))
      expect(c.retainOnDelete, c.name).not.toBe(true);
  });

  it("deletes the CRDs when told to", async () => {
    const children = await run("drop", { ...MINIMAL, deleteCrdsOnDestroy: true });
    const crds = children.filter((c) => c.type.endsWith(":CustomResourceDefinition"));
    expect(crds).toHaveLength(2);
    for (const c of crds) expect(c.retainOnDelete, c.name).not.toBe(true);
  });

  it("deletes its own HivePolicies (and the PodMonitor) before the agent: they depend on the DaemonSet", async () => {
    const children = await run("order", { ...MINIMAL, podMonitor: true, traps: [{ path: "/etc/shadow" }] });
    const ds = children.find((c) => c.type === "kubernetes:apps/v1:DaemonSet");
    const dependents = children.filter((c) => c.dependsOn.includes(ds?.name ?? "?")).map((c) => c.type);
    expect(dependents.sort()).toEqual([
      "kubernetes:hive-operator.com/v1alpha1:HivePolicy",
      "kubernetes:monitoring.coreos.com/v1:PodMonitor",
    ]);
  });
});
