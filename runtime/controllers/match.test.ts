import { Worker } from "node:worker_threads";
import type { V1Pod } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import type { HiveTrap } from "../../api/policy.ts";
import { compileMatch, matchContainers } from "./match.ts";

function pod(
  overrides: {
    name?: string;
    ns?: string;
    labels?: Record<string, string>;
    ip?: string;
    phase?: string;
    running?: boolean;
  } = {},
): V1Pod {
  return {
    metadata: {
      name: overrides.name ?? "web",
      namespace: overrides.ns ?? "default",
      labels: overrides.labels ?? {},
    },
    spec: { containers: [{ name: "nginx" }, { name: "sidecar" }] },
    status: {
      phase: overrides.phase ?? "Running",
      podIP: overrides.ip ?? "10.0.0.1",
      containerStatuses: ["nginx", "sidecar"].map((name) => ({
        name,
        image: "",
        imageID: "",
        ready: true,
        restartCount: 0,
        containerID: `containerd://${name}-id`,
        state: overrides.running === false ? { waiting: { reason: "ContainerCreating" } } : { running: {} },
      })),
    },
  };
}

const names = (trap: HiveTrap, p: V1Pod) => {
  const c = compileMatch(trap);
  if (!c.ok) throw new Error(c.message);
  return matchContainers(c.match, p).map((m) => m.name);
};

describe("trap matching", () => {
  it("matches every container of every pod without a filter", () => {
    expect(names({ path: "/x" }, pod())).toEqual(["nginx", "sidecar"]);
  });
  it("requires every filter to hold", () => {
    const trap: HiveTrap = {
      path: "/x",
      match: {
        pod: "web",
        namespace: "prod",
        ip: "10.0.0.9",
        matchLabels: { a: "1" },
        "container-name": "ng.*",
      },
    };
    const good = pod({ ns: "prod", ip: "10.0.0.9", labels: { a: "1", b: "2" } });
    expect(names(trap, good)).toEqual(["nginx"]);
    expect(names(trap, pod({ name: "other", ns: "prod", ip: "10.0.0.9", labels: { a: "1" } }))).toEqual([]);
    expect(names(trap, pod({ ns: "default", ip: "10.0.0.9", labels: { a: "1" } }))).toEqual([]);
    expect(names(trap, pod({ ns: "prod", ip: "10.0.0.8", labels: { a: "1" } }))).toEqual([]);
    expect(names(trap, pod({ ns: "prod", ip: "10.0.0.9", labels: { a: "2" } }))).toEqual([]);
  });
  it("anchors the container-name regex at both ends", () => {
    expect(names({ path: "/x", match: { "container-name": "side" } }, pod())).toEqual([]);
    expect(names({ path: "/x", match: { "container-name": "nginx|sidecar" } }, pod())).toEqual([
      "nginx",
      "sidecar",
    ]);
  });
  it("reports an invalid regex as a trap error instead of throwing", () => {
    const c = compileMatch({ path: "/x", match: { "container-name": "([" } });
    expect(c.ok).toBe(false);
    if (!c.ok) expect(c.reason).toBe("InvalidRegex");
  });
  it("reports a pattern RE2 cannot run (a backreference, a lookahead) as an invalid regex", () => {
    for (const pattern of ["(a)\\1", "(?=a)a"]) {
      const c = compileMatch({ path: "/x", match: { "container-name": pattern } });
      expect(c).toMatchObject({ ok: false, reason: "InvalidRegex" });
      if (!c.ok) expect(c.message).toMatch(/^container-name ".*": invalid regex: /);
    }
  });
  it("matches a tenant's nested quantifier against a long container name in linear time", {
    timeout: 10_000,
  }, async () => {
    // A backtracking engine takes hours here; in a worker, a stall fails the test instead of hanging it.
    const pod = podWithContainer(`${"a".repeat(60)}-`);
    expect(await namesInWorker({ path: "/x", match: { "container-name": "(a+)+" } }, pod, 5000)).toEqual([]);
  });
  it("drops finished and deleting pods, and marks containers that do not run yet", () => {
    expect(names({ path: "/x" }, pod({ phase: "Succeeded" }))).toEqual([]);
    expect(names({ path: "/x" }, pod({ phase: "Failed" }))).toEqual([]);
    const deleting = pod();
    (deleting.metadata as { deletionTimestamp?: Date }).deletionTimestamp = new Date();
    expect(names({ path: "/x" }, deleting)).toEqual([]);
    const c = compileMatch({ path: "/x" });
    if (c.ok) expect(matchContainers(c.match, pod({ running: false })).every((m) => !m.running)).toBe(true);
  });
});

function podWithContainer(name: string): V1Pod {
  const p = pod();
  p.spec = { containers: [{ name }] };
  return p;
}

/** `names`, run on a worker thread that is stopped after `timeoutMs`. */
async function namesInWorker(trap: HiveTrap, p: V1Pod, timeoutMs: number): Promise<string[]> {
  const source = `
    const { parentPort, workerData } = require("node:worker_threads");
    import(workerData.module).then(({ compileMatch, matchContainers }) => {
      const c = compileMatch(workerData.trap);
      parentPort.postMessage(c.ok ? matchContainers(c.match, workerData.pod).map((m) => m.name) : c.message);
    });`;
  const worker = new Worker(source, {
    eval: true,
    workerData: { module: new URL("./match.ts", import.meta.url).href, trap, pod: p },
  });
  try {
    return await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
      worker.once("message", (m) => {
        clearTimeout(timer);
        resolve(m);
      });
      worker.once("error", (e) => {
        clearTimeout(timer);
        reject(e);
      });
    });
  } finally {
    await worker.terminate();
  }
}
