/**
 * Every node covered: the agent tolerates every taint unless told otherwise, and its critical
 * priority class is admitted outside kube-system (GKE refuses such pods without a ResourceQuota
 * for the class in their namespace), under pulumi.runtime.setMocks.
 */
import * as pulumi from "@pulumi/pulumi";
import { describe, expect, it } from "vitest";
import { HiveMonitor, type HiveMonitorArgs } from "../../component/index.ts";
import { MINIMAL } from "./configs.ts";
import { installMocks, type RecordedResource, resolve, settle } from "./pulumi-mocks.ts";

const recorded = installMocks();

async function run(name: string, args: HiveMonitorArgs): Promise<RecordedResource[]> {
  const monitor = new HiveMonitor(name, args);
  await resolve(monitor.daemonSetName);
  await settle(recorded);
  return recorded.filter((r) => r.name === name || r.name.startsWith(`${name}-`));
}

const QUOTA = "kubernetes:core/v1:ResourceQuota";
const DAEMONSET = "kubernetes:apps/v1:DaemonSet";
const ofType = (resources: RecordedResource[], type: string) => resources.filter((r) => r.type === type);

describe("every node covered", () => {
  it("tolerates every taint by default", async () => {
    const [ds] = ofType(await run("tolerant", MINIMAL), DAEMONSET);
    expect(ds?.inputs.spec.template.spec.tolerations).toEqual([{ operator: "Exists" }]);
  });

  it("replaces the default with the tolerations given, to narrow it", async () => {
    const narrow = [
      { key: "node-role.kubernetes.io/control-plane", operator: "Exists", effect: "NoSchedule" },
    ];
    const [ds] = ofType(await run("narrow", { ...MINIMAL, tolerations: narrow }), DAEMONSET);
    expect(ds?.inputs.spec.template.spec.tolerations).toEqual(narrow);
  });

  it("admits the agent's priority class in its namespace with a ResourceQuota created before the DaemonSet", async () => {
    const resources = await run("quota", { ...MINIMAL, namespace: { existing: "security" } });
    const [quota] = ofType(resources, QUOTA);
    expect(quota?.inputs.metadata).toMatchObject({ name: "hive-agent-priority", namespace: "security" });
    expect(quota?.inputs.spec.scopeSelector).toEqual({
      matchExpressions: [{ scopeName: "PriorityClass", operator: "In", values: ["system-node-critical"] }],
    });
    // A quota limits only what it lists: pods, by far more than any cluster's nodes.
    expect(Object.keys(quota?.inputs.spec.hard)).toEqual(["pods"]);
    const [ds] = ofType(resources, DAEMONSET);
    expect(ds?.dependsOn).toContain(quota?.name);
    expect(ds?.inputs.spec.template.spec.priorityClassName).toBe("system-node-critical");
  });

  it("names the class given in the quota's scope", async () => {
    const [quota] = ofType(await run("custom", { ...MINIMAL, priorityClassName: "hive-critical" }), QUOTA);
    expect(quota?.inputs.spec.scopeSelector.matchExpressions[0].values).toEqual(["hive-critical"]);
    expect(quota?.inputs.metadata.namespace).toBe("hive-system");
  });

  it.each<[string, string, HiveMonitorArgs]>([
    [
      "in kube-system, which admits the critical classes",
      "system",
      { ...MINIMAL, namespace: { existing: "kube-system" } },
    ],
    ["without a priority class", "classless", { ...MINIMAL, priorityClassName: "" }],
    ["when turned off", "off", { ...MINIMAL, priorityClassQuota: false }],
  ])("creates no quota %s", async (_why, name, args) => {
    const resources = await run(name, args);
    expect(ofType(resources, DAEMONSET)).toHaveLength(1);
    expect(ofType(resources, QUOTA)).toEqual([]);
  });

  it("refuses a priority class known only later while the quota depends on it, naming both options", () => {
    const args = { ...MINIMAL, priorityClassName: pulumi.output("system-node-critical") };
    expect(() => new HiveMonitor("pending-class", args)).toThrow(
      /priorityClassName: .*priorityClassQuota: false/,
    );
    expect(() => new HiveMonitor("pending-class-ok", { ...args, priorityClassQuota: false })).not.toThrow();
  });
});
