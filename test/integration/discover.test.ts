/**
 * Discover, loader and pods controllers end to end through a real API server:
 * the user story, each match filter, pods and policies coming and going, status.
 */
import { mkdirSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { trapId } from "../../api/ids.ts";
import { LABEL_KERNEL_ID, LABEL_NODE, LABEL_TRAP_ID, POLICY_FINALIZER } from "../../api/meta.ts";
import type { HiveTrap } from "../../api/policy.ts";
import { fileKeyFromStat } from "../../runtime/kernel/layout.ts";
import { rejection, statusOf } from "../cluster/testing.ts";
import { UNSAFE_TEXT } from "../fixtures/hostile-text.ts";
import { AGENT_NS, Cluster, eventually, type HiveApi, POLICY_NS, startHiveApi } from "./harness.ts";

const KERNEL_A = "11111111-1111-4111-8111-111111111111";
/**
 * The test's pods only: a platform trap without match also selects the agents' own Pods (in the
 * monitor's namespace, their tokens bound to them), whose containers never start here and would
 * add "not running yet" to every status these tests read.
 */
const TEST_PODS = { namespace: "default" };

let hive: HiveApi | undefined;
beforeAll(async () => {
  hive = await startHiveApi();
});
afterAll(async () => {
  await hive?.stop();
});
let cluster: Cluster | undefined;
afterEach(async () => {
  await cluster?.stop();
  cluster = undefined;
});

const podsOf = async (c: Cluster, trap?: string) =>
  (await c.data())
    .filter((d) => !trap || d.metadata.labels?.[LABEL_TRAP_ID] === trap)
    .map((d) => `${d.metadata.annotations?.pod_name}/${d.metadata.annotations?.container_name}`)
    .sort();

/**
 * One node, pod "web" on it and policy "shadow" trapping /etc/shadow, once its HiveData is
 * written and the kernel map holds an entry of `kind`.
 */
async function trapShadowInWeb(kind: "file" | "parent") {
  cluster = await Cluster.start(hive as HiveApi);
  const c = cluster;
  const node = await c.addNode("node-1", KERNEL_A);
  await c.addPod("web", "node-1");
  await c.createPolicy("shadow", [{ path: "/etc/shadow", match: TEST_PODS }]);
  const [before] = await eventually(async () => {
    const d = await c.data();
    return d.length === 1 ? d : undefined;
  }, "HiveData");
  const kernel = await eventually(() => {
    const k = node.activeKernel();
    return k?.entries.some((e) => e.kind === kind) ? k : undefined;
  }, `kernel map holds a ${kind} entry`);
  const id = before?.metadata.annotations?.container_id?.replace("containerd://", "") ?? "";
  return { c, before, kernel, id };
}

describe("discover through the API server", () => {
  it("traps /etc/shadow in pods labelled security=high and in no other pod (the user story)", async () => {
    cluster = await Cluster.start(hive as HiveApi);
    const node = await cluster.addNode("node-1", KERNEL_A);
    await cluster.addPod("high", "node-1", { labels: { security: "high" } });
    await cluster.addPod("low", "node-1", { labels: { security: "low" } });
    await cluster.addPod("none", "node-1");
    const trap: HiveTrap = { path: "/etc/shadow", match: { matchLabels: { security: "high" } } };
    await cluster.createPolicy("shadow", [trap]);
    const id = trapId({ namespace: POLICY_NS, name: "shadow" }, trap);

    const [data] = await eventually(async () => {
      const all = await cluster?.data();
      return all?.length === 1 ? all : undefined;
    }, "one HiveData");
    expect(data?.metadata.annotations?.pod_name).toBe("high");
    expect(data?.metadata.labels?.[LABEL_TRAP_ID]).toBe(id);
    expect(data?.metadata.labels?.[LABEL_KERNEL_ID]).toBe(KERNEL_A);
    expect(data?.metadata.labels?.[LABEL_NODE]).toBe("node-1");
    expect(data?.metadata.annotations?.path).toBe("/etc/shadow");
    expect(data?.metadata.annotations?.hive_policy_name).toBe("shadow");
    // In the monitor's namespace, naming its pod (the agent's Role reaches no other namespace).
    expect(data?.metadata.namespace).toBe(AGENT_NS);
    expect(data?.metadata.annotations?.namespace).toBe("default");
    // The inode and device are the file's in that container.
    const containerId = (data?.metadata.annotations?.container_id ?? "").replace("containerd://", "");
    const file = fileKeyFromStat(
      statSync(join(cluster.containers.rootOf(containerId), "etc/shadow"), { bigint: true }),
    );
    expect(BigInt(data?.spec["inode-no"] ?? 0)).toBe(file.ino);
    expect(data?.spec.device).toEqual({ major: file.major, minor: file.minor });

    // The loader put exactly that file (and its directory) into the kernel map.
    const kernel = await eventually(() => {
      const k = node.activeKernel();
      return k?.entries.some((e) => e.kind === "file") ? k : undefined;
    }, "kernel map synced");
    const files = kernel.entries.filter((e) => e.kind === "file");
    expect(files.map((e) => e.key)).toEqual([file]);
    expect(kernel.entries.filter((e) => e.kind === "parent")).toHaveLength(1);

    // An access event reaches the alert side with the HiveData it matched.
    kernel.emit({ slot: files[0]?.slot ?? -1, kind: "file", key: file });
    expect(node.accesses.at(-1)?.matched.map((d) => d.metadata.annotations?.pod_name)).toEqual(["high"]);

    // kubectl get hivepolicies shows it works.
    const policy = await eventually(async () => {
      const p = await cluster?.getPolicy("shadow");
      return p?.status?.traps?.[0]?.inodesFound === 1 ? p : undefined;
    }, "policy status");
    expect(policy.metadata.finalizers).toContain(POLICY_FINALIZER);
    expect(policy.status?.conditions?.[0]).toMatchObject({
      type: "Ready",
      status: "True",
      reason: "TrapsWatched",
    });
    expect(policy.status?.traps?.[0]).toMatchObject({ trapId: id, matchedContainers: 1, inodesFound: 1 });
  });

  it("applies each match filter, and all of them together; no filter matches every pod", async () => {
    cluster = await Cluster.start(hive as HiveApi);
    await cluster.createNamespace("prod");
    await cluster.addNode("node-1", KERNEL_A, { loader: false, pods: false });
    await cluster.addPod("web", "node-1", {
      containers: ["nginx", "sidecar"],
      ip: "10.1.0.5",
      labels: { app: "web" },
    });
    await cluster.addPod("db", "node-1", {
      namespace: "prod",
      containers: ["postgres"],
      ip: "10.1.0.6",
      labels: { app: "db" },
    });
    const traps: Record<string, HiveTrap> = {
      all: { path: "/etc/shadow" },
      pod: { path: "/etc/shadow", match: { pod: "web" } },
      namespace: { path: "/etc/shadow", match: { namespace: "prod" } },
      ip: { path: "/etc/shadow", match: { ip: "10.1.0.6" } },
      container: { path: "/etc/shadow", match: { "container-name": "side.*" } },
      labels: { path: "/etc/shadow", match: { matchLabels: { app: "web" } } },
      combined: {
        path: "/etc/shadow",
        match: { namespace: "default", "container-name": "nginx|postgres", matchLabels: { app: "web" } },
      },
      nothing: { path: "/etc/shadow", match: { pod: "web", namespace: "prod" } },
    };
    await cluster.createPolicy("filters", Object.values(traps));
    const ids = Object.fromEntries(
      Object.entries(traps).map(([k, t]) => [k, trapId({ namespace: POLICY_NS, name: "filters" }, t)]),
    );
    const c = cluster;
    await eventually(async () => (await c.data()).length === 11, "eleven HiveData");
    expect(await podsOf(c, ids.all)).toEqual(["db/postgres", "web/nginx", "web/sidecar"]);
    expect(await podsOf(c, ids.pod)).toEqual(["web/nginx", "web/sidecar"]);
    expect(await podsOf(c, ids.namespace)).toEqual(["db/postgres"]);
    expect(await podsOf(c, ids.ip)).toEqual(["db/postgres"]);
    expect(await podsOf(c, ids.container)).toEqual(["web/sidecar"]);
    expect(await podsOf(c, ids.labels)).toEqual(["web/nginx", "web/sidecar"]);
    expect(await podsOf(c, ids.combined)).toEqual(["web/nginx"]);
    expect(await podsOf(c, ids.nothing)).toEqual([]);
    // HiveData of a pod in another namespace lives in the monitor's, naming the pod's.
    const db = (await c.data()).filter((d) => d.metadata.annotations?.pod_name === "db");
    expect(db.length).toBeGreaterThan(0);
    expect(
      db.every((d) => d.metadata.namespace === AGENT_NS && d.metadata.annotations?.namespace === "prod"),
    ).toBe(true);
  });

  it("follows pods: created after the policy, deleted, failed; and containers not running yet", async () => {
    cluster = await Cluster.start(hive as HiveApi);
    const c = cluster;
    await c.addNode("node-1", KERNEL_A);
    await c.createPolicy("shadow", [{ path: "/etc/shadow", match: TEST_PODS }]);
    const late = await c.addPod("late", "node-1", { running: false });
    await eventually(async () => {
      const p = await c.getPolicy("shadow");
      return p?.status?.traps?.[0]?.errors?.[0]?.reason === "ContainerNotReady" ? p : undefined;
    }, "waiting reported in status");
    expect(await c.data()).toHaveLength(0);
    await c.runPod(late, "10.0.0.9");
    await eventually(
      async () => (await podsOf(c)).join() === "late/app",
      "HiveData of the pod created after the policy",
    );
    await c.addPod("job", "node-1");
    await c.addPod("doomed", "node-1");
    await eventually(async () => (await c.data()).length === 3, "three HiveData");
    await c.setPodPhase("job", "Succeeded");
    await c.deletePod("doomed");
    await eventually(
      async () => (await podsOf(c)).join() === "late/app",
      "HiveData of finished and deleted pods removed",
    );
    const p = await eventually(async () => {
      const q = await c.getPolicy("shadow");
      return q?.status?.traps?.[0]?.inodesFound === 1 && !q.status.traps[0].errors ? q : undefined;
    }, "status follows");
    expect(p.status?.conditions?.[0]?.status).toBe("True");
  });

  it("arms a denying trap's file to deny, and where the kernel cannot deny says so in the trap's status while it alerts", async () => {
    cluster = await Cluster.start(hive as HiveApi);
    const c = cluster;
    const able = await c.addNode("node-1", KERNEL_A);
    const unable = await c.addNode("node-2", "22222222-2222-4222-8222-222222222222", {
      denyUnavailable: "no BPF trampolines",
    });
    await c.addPod("web-1", "node-1");
    await c.addPod("web-2", "node-2");
    await c.createPolicy("deny", [{ path: "/etc/shadow", match: TEST_PODS, action: "deny" }]);
    const policy = await eventually(async () => {
      const p = await c.getPolicy("deny");
      return p?.status?.traps?.[0]?.errors?.length === 1 && p.status.traps[0].inodesFound === 2
        ? p
        : undefined;
    }, "web-2 reported as not denied");
    expect(policy.status?.traps?.[0]?.errors?.[0]).toMatchObject({
      reason: "DenyUnavailable",
      node: "node-2",
      pod: "web-2",
      message: expect.stringContaining("no BPF trampolines"),
    });
    // Both kernels watch the file; the one that can deny is told to.
    const file = (n: typeof able) => n.activeKernel()?.entries.find((e) => e.kind === "file");
    await eventually(() => file(able) && file(unable), "both kernel maps synced");
    expect(file(able)?.deny).toBe("deny");
  });

  it("follows policy edits and deletion (finalizer), and reports bad traps in status", async () => {
    cluster = await Cluster.start(hive as HiveApi);
    const c = cluster;
    const node = await c.addNode("node-1", KERNEL_A);
    await c.addPod("web", "node-1", { files: { "etc/shadow": "x", "etc/passwd": "y" } });
    await c.createPolicy("p", [{ path: "/etc/shadow", match: TEST_PODS }]);
    await eventually(
      async () => (await c.data())[0]?.metadata.annotations?.path === "/etc/shadow",
      "first trap",
    );
    // A pattern RE2 cannot compile is refused at admission, naming the field…
    const refused = await rejection(
      c.editPolicy("p", [{ path: "/etc/shadow", match: { "container-name": "(" } }]),
    );
    expect(statusOf(refused)).toMatchObject({ code: 422 });
    expect(statusOf(refused).message).toContain("spec.traps[0].match.container-name");
    // …one RE2 compiles but that would cost too much to run is the agent's to report.
    await c.editPolicy("p", [
      { path: "/etc/passwd", match: TEST_PODS },
      { path: "/etc/missing", match: TEST_PODS },
      { path: "/etc/shadow", match: { ...TEST_PODS, "container-name": "a{1000}" } },
      { path: "/var/hive/created", create: true, mode: "0640", match: TEST_PODS },
    ]);
    const policy = await eventually(async () => {
      const q = await c.getPolicy("p");
      const paths = (await c.data()).map((d) => d.metadata.annotations?.path).sort();
      return paths.join() === "/etc/passwd,/var/hive/created" &&
        q?.status?.traps?.length === 4 &&
        q.status.traps[1]?.errors
        ? q
        : undefined;
    }, "edited policy applied");
    const [passwd, missing, badRegex, created] = policy.status?.traps ?? [];
    expect(passwd).toMatchObject({ path: "/etc/passwd", matchedContainers: 1, inodesFound: 1 });
    expect(missing).toMatchObject({ path: "/etc/missing", matchedContainers: 1, inodesFound: 0 });
    expect(missing?.errors?.[0]).toMatchObject({
      reason: "FileNotFound",
      node: "node-1",
      pod: "web",
      container: "app",
    });
    expect(badRegex?.errors?.[0]?.reason).toBe("InvalidRegex");
    expect(created).toMatchObject({ inodesFound: 1 });
    expect(policy.status?.conditions?.[0]).toMatchObject({ status: "False", reason: "TrapErrors" });
    const root = c.containers.rootOf(
      (await c.data())[0]?.metadata.annotations?.container_id?.replace("containerd://", "") ?? "",
    );
    expect(statSync(join(root, "var/hive/created")).mode & 0o7777).toBe(0o640);
    // The kernel map follows: the old /etc/shadow inode is no longer watched.
    const shadow = fileKeyFromStat(statSync(join(root, "etc/shadow"), { bigint: true }));
    await eventually(
      () => node.activeKernel()?.entries.filter((e) => e.kind === "file").length === 2,
      "kernel map of the edit",
    );
    expect(node.activeKernel()?.entries.some((e) => e.kind === "file" && e.key.ino === shadow.ino)).toBe(
      false,
    );

    await c.deletePolicy("p");
    await eventually(async () => (await c.getPolicy("p")) === undefined, "policy gone after its finalizer");
    expect(await c.data()).toHaveLength(0);
    await eventually(() => node.activeKernel()?.entries.length === 0, "kernel map emptied");
    const events = await c.admin.core.listNamespacedEvent({
      namespace: POLICY_NS,
      labelSelector: "app.kubernetes.io/managed-by=hive",
    });
    expect(events.items).toHaveLength(0);
  });

  it("re-resolves when the trapped file is replaced by rename (kernel control event on its directory)", async () => {
    const { c, before, kernel, id } = await trapShadowInWeb("parent");
    c.containers.replaceByRename(id, "etc/shadow", "new content\n");
    const fresh = fileKeyFromStat(statSync(join(c.containers.rootOf(id), "etc/shadow"), { bigint: true }));
    expect(fresh.ino).not.toBe(BigInt(before?.spec["inode-no"] ?? 0));
    // Nothing notices without the kernel's report: no polling.
    await new Promise((r) => setTimeout(r, 200));
    expect((await c.data())[0]?.spec["inode-no"]).toBe(before?.spec["inode-no"]);
    const parent = kernel.entries.find((e) => e.kind === "parent");
    kernel.emit({ slot: parent?.slot ?? -1, kind: "parent", accesses: ["write"] });
    await eventually(
      async () => BigInt((await c.data())[0]?.spec["inode-no"] ?? 0) === fresh.ino,
      "HiveData follows the new inode",
    );
    await eventually(
      () => kernel.entries.some((e) => e.kind === "file" && e.key.ino === fresh.ino),
      "kernel map follows",
    );
  });

  it("follows two replacements reported on the file itself at once, in memory: no request through the API server, even while its HiveData writes fail", async () => {
    const { c, before, kernel, id } = await trapShadowInWeb("file");
    const file = kernel.entries.find((e) => e.kind === "file");
    expect(file?.changes).toBe(true);
    // The API server refuses every HiveData write meanwhile: arming must not wait for it.
    c.inject({ verb: "update", resource: "hivedata", status: 503 });
    const path = join(c.containers.rootOf(id), "etc/shadow");
    const patchesBefore = c.api.countRequests({ verb: "patch", resource: "hivedata" });
    for (const n of [1, 2]) {
      // Two replacements milliseconds apart, each reported by the kernel on the file it replaced.
      const replaced = kernel.entries.find((e) => e.kind === "file");
      c.containers.replaceByRename(id, "etc/shadow", `version ${n}\n`);
      kernel.emit({ slot: replaced?.slot ?? -1, kind: "file", accesses: [], mask: 0, change: "replaced" });
    }
    const last = fileKeyFromStat(statSync(path, { bigint: true }));
    await eventually(
      () => kernel.entries.some((e) => e.kind === "file" && e.key.ino === last.ino),
      "the kernel map follows the last file",
    );
    expect((await c.data())[0]?.spec["inode-no"]).toBe(before?.spec["inode-no"]);
    expect(c.api.countRequests({ verb: "patch", resource: "hivedata" })).toBe(patchesBefore);
  });

  it("keeps the directory watched while a trapped file is deleted, and follows its re-creation", async () => {
    const { c, kernel, id } = await trapShadowInWeb("file");
    const file = join(c.containers.rootOf(id), "etc/shadow");
    const parentSlot = () => kernel.entries.find((e) => e.kind === "parent")?.slot ?? -1;

    rmSync(file);
    kernel.emit({ slot: parentSlot(), kind: "parent", accesses: ["write"] });
    await eventually(
      () => kernel.entries.length === 1 && kernel.entries[0]?.kind === "parent",
      "only the directory stays watched",
    );
    const missing = await eventually(async () => {
      const p = await c.getPolicy("shadow");
      return p?.status?.traps?.[0]?.errors?.[0]?.reason === "FileNotFound" ? p : undefined;
    }, "status reports the missing file");
    expect(missing.status?.traps?.[0]).toMatchObject({ matchedContainers: 1, inodesFound: 0 });
    expect(await c.data()).toHaveLength(1);

    writeFileSync(file, "re-created\n");
    const fresh = statSync(file, { bigint: true }).ino;
    kernel.emit({ slot: parentSlot(), kind: "parent", accesses: ["write"] });
    await eventually(
      () => kernel.entries.some((e) => e.kind === "file" && e.key.ino === fresh),
      "the re-created file is watched",
    );
    await eventually(async () => {
      const p = await c.getPolicy("shadow");
      return p?.status?.traps?.[0]?.inodesFound === 1 && !p.status.traps[0].errors;
    }, "status recovers");
  });

  it("quotes a container's symlink targets in status and in the trap error Event escaped, on one line and bounded", async () => {
    cluster = await Cluster.start(hive as HiveApi);
    const c = cluster;
    await c.addNode("node-1", KERNEL_A);
    const pod = await c.addPod("web", "node-1", { files: {} });
    const containerId = pod.status?.containerStatuses?.[0]?.containerID?.replace("containerd://", "") ?? "";
    const root = c.containers.rootOf(containerId);
    // A 4 KiB chain of real directories; names open with a newline, an ANSI escape and a bidi override.
    const dirs = Array.from({ length: 16 }, (_, i) => `${i}`.padStart(240, "d"));
    dirs[0] = `\n\x1b[31mERROR\u202e${dirs[0]}`;
    mkdirSync(join(root, ...dirs), { recursive: true });
    mkdirSync(join(root, "etc"), { recursive: true });
    symlinkSync(`../${dirs.join("/")}/\n\x1b[31mERROR\u202egone`, join(root, "etc/shadow"));
    await c.createPolicy("shadow", [{ path: "/etc/shadow", match: TEST_PODS }]);
    const policy = await eventually(async () => {
      const p = await c.getPolicy("shadow");
      return p?.status?.traps?.[0]?.errors?.[0]?.reason === "FileNotFound" ? p : undefined;
    }, "status reports the missing file");
    const statusMessage = policy.status?.traps?.[0]?.errors?.[0]?.message ?? "";
    expect(statusMessage).not.toMatch(UNSAFE_TEXT);
    expect(statusMessage.length).toBeLessThanOrEqual(1024);
    expect(statusMessage).toMatch(/^FileNotFound: \/\\n\\x1b\[31mERROR\\u202ed+0\/d+1\//);
    const events = await eventually(async () => {
      const list = await c.admin.core.listNamespacedEvent({
        namespace: POLICY_NS,
        labelSelector: "app.kubernetes.io/managed-by=hive",
      });
      return list.items.length > 0 ? list.items : undefined;
    }, "trap error Event");
    const eventMessage = events[0]?.message ?? "";
    expect(eventMessage).not.toMatch(UNSAFE_TEXT);
    expect(eventMessage.length).toBeLessThanOrEqual(1024 + 320);
    expect(eventMessage).toMatch(/^pod web: container app: FileNotFound: \/\\n\\x1b\[31mERROR\\u202ed+0\//);
  });

  it("moves to the new container when a container restarts", async () => {
    cluster = await Cluster.start(hive as HiveApi);
    const c = cluster;
    await c.addNode("node-1", KERNEL_A, { loader: false, pods: false });
    const pod = await c.addPod("web", "node-1");
    await c.createPolicy("shadow", [{ path: "/etc/shadow" }]);
    const [first] = await eventually(async () => {
      const d = await c.data();
      return d.length === 1 ? d : undefined;
    }, "HiveData of the first container");
    await c.runPod(pod, "10.0.0.50"); // the kubelet reports a new container id for "app"
    const [second] = await eventually(async () => {
      const d = await c.data();
      return d.length === 1 && d[0]?.metadata.name !== first?.metadata.name ? d : undefined;
    }, "HiveData of the restarted container only");
    expect(second?.metadata.annotations?.container_id).not.toBe(first?.metadata.annotations?.container_id);
    expect(second?.metadata.annotations?.pod_ip).toBe("10.0.0.50");
  });
});

describe("discover and allow lists", () => {
  it("writes the files at the allow entries' exact paths, found in the same container, into the HiveData", async () => {
    cluster = await Cluster.start(hive as HiveApi);
    const c = cluster;
    await c.addNode("node-1", KERNEL_A);
    // Each container its own sshd; one container has none.
    await c.addPod("web-a", "node-1", {
      files: { "etc/shadow": "x", "usr/sbin/sshd": "a", "usr/sbin/cron": "c" },
    });
    await c.addPod("web-b", "node-1", { files: { "etc/shadow": "x", "usr/sbin/sshd": "b" } });
    await c.addPod("web-c", "node-1", { files: { "etc/shadow": "x" } });
    const allow = [
      { exe: "/usr/sbin/sshd" },
      { exe: "/usr/lib/openssh/*" },
      { "parent-exe": "/usr/sbin/cron" },
    ];
    await c.createPolicy("shadow", [{ path: "/etc/shadow", allow }]);
    const data = await eventually(async () => {
      const d = await c.data();
      return d.length === 3 ? d : undefined;
    }, "three HiveData");
    const expected = (pod: string, paths: string[]) => {
      const d = data.find((x) => x.metadata.annotations?.pod_name === pod);
      const id = d?.metadata.annotations?.container_id?.replace("containerd://", "") ?? "";
      return paths.map((path) => {
        const key = fileKeyFromStat(statSync(join(c.containers.rootOf(id), path), { bigint: true }));
        return { path, "inode-no": key.ino.toString(), device: { major: key.major, minor: key.minor } };
      });
    };
    const executables = (pod: string) =>
      data.find((x) => x.metadata.annotations?.pod_name === pod)?.spec.executables ?? [];
    // The prefix pattern resolves to nothing (matched on the kernel's path); a missing file is left out.
    expect(executables("web-a")).toEqual(expected("web-a", ["/usr/sbin/sshd", "/usr/sbin/cron"]));
    expect(executables("web-b")).toEqual(expected("web-b", ["/usr/sbin/sshd"]));
    expect(executables("web-c")).toEqual([]);
  });
});
