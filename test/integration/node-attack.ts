/**
 * What a compromised node's agent tries against another node's kernel, with its own token: a
 * cluster of two nodes where node-1's kernel watches a trap, node-1's Lease taken, and a HiveData
 * for node-1's kernel written; and what node-1's loader must withstand.
 */
import { CoordinationV1Api, CustomObjectsApi, V1MicroTime } from "@kubernetes/client-node";
import { expect } from "vitest";
import { trapId } from "../../api/ids.ts";
import { GROUP, LABEL_KERNEL_ID, LABEL_NODE, PLURAL_DATA, VERSION } from "../../api/meta.ts";
import {
  AGENT_NS,
  type Cluster,
  eventually,
  FAST_LEASE,
  POLICY_NS,
  type RecordingKernel,
  type SimNode,
} from "./harness.ts";

const TRAP = { path: "/etc/shadow" };
/** The inode the attacker's HiveData names. */
const PLANTED_INO = 4242n;

/**
 * node-1 on `kernel`, node-2 on `otherKernel`, a pod on node-1 and a policy trapping /etc/shadow;
 * resolves once node-1's kernel watches the file. `options`: both agents' (harness addNode).
 */
export async function armedOnNode1(
  c: Cluster,
  kernel: string,
  otherKernel: string,
  options: { sharedKernels?: boolean; logLines?: string[] } = {},
): Promise<{ node1: SimNode; kernel: RecordingKernel }> {
  const node1 = await c.addNode("node-1", kernel, options);
  await c.addNode("node-2", otherKernel, { ...options, logLines: [] });
  await c.addPod("web", "node-1");
  await c.createPolicy("shadow", [TRAP]);
  const watching = await eventually(() => {
    const k = node1.activeKernel();
    return k?.entries.some((e) => e.kind === "file") ? k : undefined;
  }, "node-1's kernel armed");
  return { node1, kernel: watching };
}

/**
 * `attacker`'s agent writes, as admission lets it, a HiveData of its own node for the policy's
 * trap, naming `kernel` and an inode of its choosing: `watching` must never arm it.
 */
export async function plantDataFor(
  c: Cluster,
  attacker: string,
  kernel: string,
  watching: RecordingKernel,
): Promise<void> {
  await (await c.agentKubeConfig(attacker)).makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace: AGENT_NS,
    plural: PLURAL_DATA,
    body: {
      apiVersion: `${GROUP}/${VERSION}`,
      kind: "HiveData",
      metadata: {
        name: "planted",
        labels: {
          [LABEL_NODE]: attacker,
          [LABEL_KERNEL_ID]: kernel,
          "trap-id": trapId({ namespace: POLICY_NS, name: "shadow" }, TRAP),
        },
        annotations: { callback: "https://attacker.example/", path: TRAP.path },
      },
      spec: {
        "inode-no": String(PLANTED_INO),
        "kernel-id": kernel,
        device: { major: 8, minor: 1 },
        accesses: ["read"],
      },
    },
  });
  await new Promise((resolve) => setTimeout(resolve, 1500));
  expect([...watching.everWatched].some((k) => k.endsWith(`:${PLANTED_INO}`))).toBe(false);
  expect(watching.entries.some((e) => e.key.ino === PLANTED_INO)).toBe(false);
}

/** Writes `holder` into the Lease as its holder, acquired and renewed now. */
export async function takeLease(leases: CoordinationV1Api, name: string, holder: string) {
  const lease = await leases.readNamespacedLease({ name, namespace: AGENT_NS });
  const now = new V1MicroTime();
  const spec = { ...lease.spec, holderIdentity: holder, renewTime: now, acquireTime: now };
  return leases.replaceNamespacedLease({ name, namespace: AGENT_NS, body: { ...lease, spec } });
}

/**
 * `attacker`'s agent holds `kernel`'s Lease as itself, renewing faster than any candidate, for
 * four Lease durations: `victim`'s loader must never step down, and must hold the Lease after.
 */
export async function holdLeaseAgainst(
  c: Cluster,
  attacker: string,
  kernel: string,
  victim: SimNode,
): Promise<void> {
  const name = `hive-loader-${kernel}`;
  const leases = (await c.agentKubeConfig(attacker)).makeApiClient(CoordinationV1Api);
  const until = performance.now() + 4 * FAST_LEASE.leaseDurationMs;
  while (performance.now() < until) {
    // A 409 when the victim wrote in between.
    await takeLease(leases, name, `${attacker}/hive-agent-${attacker}`).catch(() => undefined);
    expect(victim.agent.loader(), `${victim.name} still loads kernel ${kernel}`).toBeTruthy();
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  expect(victim.kernels).toHaveLength(1);
  expect(victim.kernels[0]?.closed).toBe(false);
  const rightful = `${victim.name}/hive-agent-${victim.name}`;
  await eventually(
    async () =>
      (await leases.readNamespacedLease({ name, namespace: AGENT_NS })).spec?.holderIdentity === rightful,
    `kernel ${kernel}'s Lease back with ${victim.name}`,
  );
}
