/**
 * A HiveData is trusted for its file's identity only: where alerts go, what is allowed and whose
 * tenancy applies come from the live HivePolicy its trap-id names. Here whoever can write HiveData
 * (a wildcard role, a compromised node for its own kernel) rewrites one, and creates one for a trap
 * no policy holds; the admission policies are not installed, so the loader alone must hold.
 */
import { statSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { HiveData } from "../../api/data.ts";
import {
  GROUP,
  LABEL_KERNEL_ID,
  LABEL_POLICY_NAMESPACE,
  LABEL_TRAP_ID,
  PLURAL_DATA,
  VERSION,
} from "../../api/meta.ts";
import type { HiveTrap } from "../../api/policy.ts";
import { createAlertPipeline } from "../../runtime/alerts/pipeline.ts";
import { fileIdentity } from "../../runtime/controllers/hive-data.ts";
import { fileKeyFromStat } from "../../runtime/kernel/layout.ts";
import { createLogger } from "../../runtime/log.ts";
import { createHiveMetrics } from "../../runtime/metrics/metrics.ts";
import { startReceiver } from "../alerts/receiver.ts";
import { AGENT_NS, Cluster, eventually, type HiveApi, type SimNode, startHiveApi } from "./harness.ts";

const KERNEL_A = "44444444-4444-4444-8444-444444444444";
let hive: HiveApi | undefined;
beforeAll(async () => {
  hive = await startHiveApi({
    admission: { off: "the loader must ignore a forged HiveData even where admission would not stop it" },
  });
});
afterAll(async () => {
  await hive?.stop();
});
const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function setUp(allow?: HiveTrap["allow"]) {
  const cluster = await Cluster.start(hive as HiveApi);
  cleanups.push(() => cluster.stop());
  const [monitor, tenant, attacker] = await Promise.all([startReceiver(), startReceiver(), startReceiver()]);
  for (const r of [monitor, tenant, attacker]) cleanups.push(() => r.close());
  const alerts = await createAlertPipeline({
    logger: createLogger({}, { level: "error" }),
    metrics: createHiveMetrics({ processMetrics: false }),
    defaultCallback: monitor.url,
    tenancy: { platformNamespace: AGENT_NS, callbacks: [tenant.url] },
    lines: false,
    rateLimit: false,
  });
  cleanups.push(() => alerts.close());
  const node = await cluster.addNode("node-1", KERNEL_A, { alerts });
  await cluster.createNamespace("team-a");
  await cluster.addPod("web", "node-1", {
    namespace: "team-a",
    files: { "etc/shadow": "root:*:1::::::\n", "etc/passwd": "root:x:0:0::/root:/bin/sh\n" },
  });
  const trap: HiveTrap = {
    path: "/etc/shadow",
    callback: `${tenant.url}/team-a`,
    ...(allow ? { allow } : {}),
  };
  await cluster.createPolicy("team-traps", [trap], "team-a");
  const [data] = await eventually(async () => {
    const all = await cluster.data();
    return all.length === 1 ? all : undefined;
  }, "the trap's HiveData");
  const kernel = await eventually(() => {
    const k = node.activeKernel();
    return k?.entries.some((e) => e.kind === "file") ? k : undefined;
  }, "kernel map synced");
  // Discover would restore the object it owns; the forger's version must be what the loader holds.
  node.agent.discover.stop();
  return { cluster, node, kernel, alerts, data: data as HiveData, receivers: { monitor, tenant, attacker } };
}

/** Waits until the node's loader holds, for `slot`, a HiveData that `forged` recognises. */
const loaderHolds = (node: SimNode, slot: number | undefined, forged: (d: HiveData) => boolean) =>
  eventually(
    () =>
      node.agent
        .loader()
        ?.lookup(slot ?? -1)
        .some(forged),
    "the loader holds the forged HiveData",
  );

const write = (cluster: Cluster, body: HiveData) =>
  cluster.admin.custom.replaceNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace: AGENT_NS,
    plural: PLURAL_DATA,
    name: body.metadata.name ?? "",
    body,
  });

describe("a forged HiveData", () => {
  it("changes neither where its alerts go, nor what is allowed, nor whose tenancy applies", async () => {
    const { cluster, node, kernel, alerts, data, receivers } = await setUp();
    const forged: HiveData = {
      ...data,
      metadata: {
        ...data.metadata,
        labels: { ...data.metadata.labels, [LABEL_POLICY_NAMESPACE]: AGENT_NS },
        annotations: { ...data.metadata.annotations, callback: `${receivers.attacker.url}/steal` },
      },
      spec: { ...data.spec, allow: [{ exe: "/usr/bin/cat" }] } as HiveData["spec"],
    };
    await write(cluster, forged);
    const file = kernel.entries.find((e) => e.kind === "file");
    await loaderHolds(
      node,
      file?.slot,
      (d) => d.metadata.annotations?.callback === forged.metadata.annotations?.callback,
    );
    const key = file?.key ?? { major: 0, minor: 0, ino: 0n };
    kernel.emit({ slot: file?.slot ?? -1, kind: "file", key }); // /usr/bin/cat, the forged allow entry
    kernel.emit({
      slot: file?.slot ?? -1,
      kind: "file",
      key,
      process: { exe: { exe: "/usr/bin/vi", source: "exec" }, execNs: 1n },
    });
    expect(await alerts.drain(10_000)).toBe(true);

    const received = receivers.tenant.accepted.map(
      (r) => JSON.parse(r.body) as { hive_policy_namespace?: string; process: { exe?: string } },
    );
    expect(received.map((a) => a.process.exe)).toEqual(["/usr/bin/cat", "/usr/bin/vi"]);
    expect(received.map((a) => a.hive_policy_namespace)).toEqual(["team-a", "team-a"]);
    expect(receivers.attacker.requests).toBe(0);
    expect(receivers.monitor.requests).toBe(0);
  });

  it("naming a trap no live policy holds is never armed, and its file's events alert nobody", async () => {
    const { cluster, kernel, alerts, data, receivers } = await setUp();
    const containerId = (data.metadata.annotations?.container_id ?? "").replace("containerd://", "");
    const passwd = statSync(join(cluster.containers.rootOf(containerId), "etc/passwd"), { bigint: true });
    const key = fileKeyFromStat(passwd);
    const { resourceVersion: _rv, uid: _uid, creationTimestamp: _ct, ...meta } = data.metadata;
    const orphan: HiveData = {
      ...data,
      metadata: {
        ...meta,
        name: "hive-data-forged",
        labels: { ...data.metadata.labels, [LABEL_TRAP_ID]: "f".repeat(40), [LABEL_KERNEL_ID]: KERNEL_A },
        annotations: { ...data.metadata.annotations, callback: `${receivers.attacker.url}/steal` },
      },
      spec: { ...data.spec, "inode-no": key.ino.toString(), device: { major: key.major, minor: key.minor } },
    };
    await cluster.admin.custom.createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: AGENT_NS,
      plural: PLURAL_DATA,
      body: orphan,
    });
    // The loader saw it: after its grace period it deletes a HiveData whose trap no policy holds.
    await eventually(
      async () => !(await cluster.data()).some((d) => d.metadata.name === "hive-data-forged"),
      "the loader deletes the orphan",
    );
    // By this node's agent, as the API server's audit log says: a loader restarted meanwhile (its
    // Lease lapsing under load) counts the deletion in the earlier instance's stats, not the new one's.
    const deletions = cluster.api.cp.audit.find({
      verb: "delete",
      name: "hive-data-forged",
      user: cluster.installed.agentUser,
      codes: [200],
    });
    expect(deletions).toHaveLength(1);
    expect(kernel.everWatched.has(`${key.major}:${key.minor}:${key.ino}`)).toBe(false);
    kernel.emit({ slot: 99, kind: "file", key });
    expect(await alerts.drain(10_000)).toBe(true);
    expect(receivers.attacker.requests).toBe(0);
    expect(receivers.tenant.requests).toBe(0);
    expect(receivers.monitor.requests).toBe(0);
  });

  it("naming the attacker's binary among its executables allows nothing the image did not ship", async () => {
    const { cluster, node, kernel, alerts, data, receivers } = await setUp([{ exe: "/usr/sbin/sshd" }]);
    // A binary written at /usr/sbin/sshd in the container, which the forger lists as the file there.
    const dropped = { major: 0, minor: 77, ino: 4242n };
    const forged: HiveData = {
      ...data,
      spec: { ...data.spec, executables: [{ path: "/usr/sbin/sshd", ...fileIdentity(dropped) }] },
    };
    await write(cluster, forged);
    const file = kernel.entries.find((e) => e.kind === "file");
    await loaderHolds(node, file?.slot, (d) => d.spec.executables?.[0]?.["inode-no"] === "4242");
    kernel.emit({
      slot: file?.slot ?? -1,
      kind: "file",
      key: file?.key ?? { major: 0, minor: 0, ino: 0n },
      process: {
        exe: { exe: "/usr/sbin/sshd", source: "exec" },
        provenance: {
          file: dropped,
          layer: "container",
          loaderEnv: [],
          envUnread: false,
          traced: false,
          forkUnseen: false,
        },
        chroot: false,
        rootDev: { major: 0, minor: 77 },
        execNs: 1n,
      },
    });
    expect(await alerts.drain(10_000)).toBe(true);
    const received = receivers.tenant.accepted.map(
      (r) => JSON.parse(r.body) as { allow_misses?: { reason: string }[] },
    );
    expect(received.map((a) => a.allow_misses?.[0]?.reason)).toEqual(["written-in-container"]);
  });
});
