/**
 * A user's Pulumi program, as the installed package runs it: HiveMonitor from `packageName`
 * under Pulumi mocks, printing the policy names, the sorted resource types registered and the
 * objects renderManifests gives for the same arguments (one JSON line).
 */
export function mockedMonitorProgram(packageName: string, image: string): string {
  return `import * as pulumi from "@pulumi/pulumi";
const types = [];
pulumi.runtime.setMocks({ newResource: (a) => { types.push(a.type); return { id: a.name, state: a.inputs }; }, call: (a) => a.inputs }, "p", "s", false);
const { HiveMonitor, renderManifests } = await import(${JSON.stringify(packageName)});
const args = { image: ${JSON.stringify(image)}, traps: [{ path: "/etc/shadow", match: { matchLabels: { security: "high" } } }] };
const m = new HiveMonitor("hive", args);
const names = await new Promise((r) => m.policyNames.apply(r));
await new Promise((r) => setTimeout(r, 200));
console.log(JSON.stringify({ names, types: types.sort(), rendered: renderManifests(args) }));
`;
}
