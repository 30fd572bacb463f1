import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { V1Pod } from "@kubernetes/client-node";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { HiveData } from "../../api/data.ts";
import { HiveError } from "../../api/errors.ts";
import { ANNOTATION_RESOLVE_REQUEST, LABEL_NODE } from "../../api/meta.ts";
import type { HivePolicy } from "../../api/policy.ts";
import { echoDataWriter } from "../../test/fixtures/data-writer.ts";
import { FakeContainers } from "../../test/integration/harness.ts";
import { createFileResolver, type FileResolver } from "../discover/file-resolver.ts";
import { createLogger } from "../log.ts";
import { createDiscoverController } from "./discover.ts";
import type { DataWriter, NodeTrapError } from "./ports.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function policy(name: string, spec: unknown): HivePolicy {
  return {
    apiVersion: "hive-operator.com/v1alpha1",
    kind: "HivePolicy",
    metadata: { name, namespace: "hive", generation: 1 },
    spec,
  } as HivePolicy;
}

/** Pod "web" on node n1 whose container `app` runs as `containerID`. */
function runningPod(containerID: string): V1Pod {
  return {
    metadata: { name: "web", namespace: "default", uid: "u1" },
    spec: { nodeName: "n1", containers: [{ name: "app" }] },
    status: {
      phase: "Running",
      containerStatuses: [
        {
          name: "app",
          image: "",
          imageID: "",
          ready: true,
          restartCount: 0,
          containerID,
          state: { running: {} },
        },
      ],
    },
  };
}

/** Fake containers under a temporary directory removed after the test. */
function fakeContainers(): FakeContainers {
  const base = mkdtempSync(join(tmpdir(), "hive-discover-"));
  dirs.push(base);
  return new FakeContainers(base);
}

/** A discover controller of node n1 over `containers`, writing to an echo writer, reporting nothing. */
function discoverOptions(containers: FakeContainers): Parameters<typeof createDiscoverController>[0] {
  return {
    nodeName: "n1",
    platformNamespace: "hive",
    kernelId: "eeeeeeee-5555-4555-8555-555555555555",
    resolver: createFileResolver(containers, containers.proc),
    writer: echoDataWriter(),
    reporter: { sync: async () => undefined },
    log: createLogger({}, { level: "error" }),
    debounceMs: 1,
  };
}

describe("discover controller", () => {
  it("ignores a policy without a usable spec and keeps serving the others", async () => {
    const base = mkdtempSync(join(tmpdir(), "hive-discover-"));
    dirs.push(base);
    const containers = new FakeContainers(base);
    const containerID = containers.add("c1");
    const created: HiveData[] = [];
    const reports: NodeTrapError[][] = [];
    // The API side is recorded: it is a port, not the logic under test.
    const writer: DataWriter = {
      create: async (d) => {
        created.push(d);
        return d;
      },
      replace: async (d) => d,
      remove: async () => undefined,
      annotate: async () => undefined,
    };
    const discover = createDiscoverController({
      nodeName: "n1",
      platformNamespace: "hive",
      kernelId: "eeeeeeee-5555-4555-8555-555555555555",
      resolver: createFileResolver(containers, containers.proc),
      writer,
      reporter: { sync: async (e) => void reports.push([...e]) },
      log: createLogger({}, { level: "error" }),
      debounceMs: 1,
    });
    const pod = runningPod(containerID);
    discover.onPod("ADDED", pod);
    discover.onPolicy("ADDED", policy("broken", { traps: "not a list" }));
    discover.onPolicy("ADDED", policy("relative", { traps: [{ path: "etc/shadow" }] }));
    discover.onPolicy(
      "ADDED",
      policy("good", {
        traps: [{ path: "/etc/shadow" }, { path: "/etc/shadow", create: true, mode: "999" }],
      }),
    );
    discover.markSynced();
    await discover.idle();
    expect(created.map((d) => d.metadata.labels?.["hive-operator.com/policy"])).toEqual(["good"]);
    // A trap with an unusable mode is a per-trap error, not a failed pass.
    expect(reports.at(-1)?.map((r) => r.reason)).toEqual(["PolicyInvalid"]);
    expect(discover.stats().passes).toBeGreaterThan(0);
    discover.stop();
  });

  it("reports a container that does not run only once it has waited a while", async () => {
    const containers = fakeContainers();
    const reports: string[][] = [];
    const discover = createDiscoverController({
      ...discoverOptions(containers),
      reporter: { sync: async (e) => void reports.push(e.map((r) => r.reason)) },
      notReadyReportMs: 150,
    });
    discover.onPod("ADDED", {
      metadata: { name: "web", namespace: "default", uid: "u1" },
      spec: { nodeName: "n1", containers: [{ name: "app" }] },
      status: { phase: "Pending" },
    });
    discover.onPolicy("ADDED", policy("good", { traps: [{ path: "/etc/shadow" }] }));
    discover.markSynced();
    await discover.idle();
    expect(reports.at(-1)).toEqual([]);
    // The report comes from a timer armed for the moment the wait becomes worth reporting.
    await new Promise((r) => setTimeout(r, 250));
    await discover.idle();
    expect(reports.at(-1)).toEqual(["ContainerNotReady"]);
    discover.stop();
  });

  it("keeps a trap armed through a resolution error of the node (a resolver thread that died), and retries", async () => {
    const base = mkdtempSync(join(tmpdir(), "hive-discover-"));
    dirs.push(base);
    const containers = new FakeContainers(base);
    const containerID = containers.add("c1");
    const removed: string[] = [];
    const created: HiveData[] = [];
    const real = createFileResolver(containers, containers.proc);
    let failing = false;
    // What the resolve pool answers when its thread dies mid-walk (resolve-pool.ts): the node's
    // fault, not the path's.
    const threadDied = new HiveError("PathInvalid", "the path resolver thread failed", {
      object: "/etc/shadow",
      transient: true,
    });
    const resolver: FileResolver = {
      ...real,
      async openContainer(id) {
        const files = await real.openContainer(id);
        return {
          ...files,
          resolveAll: async (walks) =>
            failing ? walks.map(() => ({ ok: false, error: threadDied })) : files.resolveAll(walks),
        };
      },
    };
    const discover = createDiscoverController({
      nodeName: "n1",
      platformNamespace: "hive",
      kernelId: "eeeeeeee-5555-4555-8555-555555555555",
      resolver,
      writer: {
        create: async (d) => {
          created.push(d);
          discover.onData("ADDED", d);
          return d;
        },
        replace: async (d) => d,
        remove: async (_ns, name) => void removed.push(name),
        annotate: async () => undefined,
      },
      reporter: { sync: async () => undefined },
      log: createLogger({}, { level: "error" }),
      debounceMs: 1,
      retryBaseMs: 20,
    });
    const pod = runningPod(containerID);
    discover.onPod("ADDED", pod);
    discover.onPolicy("ADDED", policy("good", { traps: [{ path: "/etc/shadow" }] }));
    discover.markSynced();
    await discover.idle();
    expect(created).toHaveLength(1);
    failing = true;
    discover.onPod("MODIFIED", pod);
    await discover.idle();
    await new Promise((r) => setTimeout(r, 100)); // retries come and fail too
    expect(removed).toEqual([]);
    const passes = discover.stats().passes;
    expect(passes).toBeGreaterThan(2);
    discover.stop();
    await real.close?.();
  });
});

describe("pods by uid, for accesses attributed by cgroup", () => {
  it("keeps a deleted pod nameable for a minute: its last accesses may still wait in the ring", () => {
    const discover = createDiscoverController(discoverOptions(fakeContainers()));
    const start = Date.now();
    let now = start;
    const clock = vi.spyOn(Date, "now").mockImplementation(() => now);
    try {
      const pod = runningPod(`containerd://${"a".repeat(64)}`);
      discover.onPod("ADDED", pod);
      discover.onPod("DELETED", pod);
      expect(discover.podByUid("u1")?.metadata?.name).toBe("web");
      now = start + 61_000;
      discover.onPod("ADDED", { ...pod, metadata: { name: "other", namespace: "default", uid: "u2" } });
      expect(discover.podByUid("u1")).toBeUndefined();
      expect(discover.podByUid("u2")?.metadata?.name).toBe("other");
    } finally {
      clock.mockRestore();
      discover.stop();
    }
  });
});

describe("re-resolve requests through HiveData", () => {
  it("answer a stream of requests with at most one pass per interval, whoever writes them", async () => {
    const discover = createDiscoverController({
      ...discoverOptions(fakeContainers()),
      resolveRequestIntervalMs: 300,
    });
    discover.markSynced();
    await discover.idle();
    const data = (request: number): HiveData =>
      ({
        apiVersion: "hive-operator.com/v1alpha1",
        kind: "HiveData",
        metadata: {
          name: "hive-data-x",
          namespace: "hive",
          labels: { [LABEL_NODE]: "n1" },
          annotations: { [ANNOTATION_RESOLVE_REQUEST]: String(request) },
        },
        spec: {},
      }) as unknown as HiveData;
    const before = discover.stats().passes;
    // Another node's token, rewriting the request every 25 ms for a second.
    for (let i = 1; i <= 40; i++) {
      discover.onData("MODIFIED", data(i));
      await new Promise((r) => setTimeout(r, 25));
    }
    await new Promise((r) => setTimeout(r, 400));
    await discover.idle();
    const passes = discover.stats().passes - before;
    expect(passes).toBeGreaterThanOrEqual(2);
    expect(passes).toBeLessThanOrEqual(6);
    expect(discover.stats().resolveRequestsFolded).toBeGreaterThan(30);
    discover.stop();
  });
});
