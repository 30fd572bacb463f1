import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { afterEach, describe, expect, it } from "vitest";
import { connectRuntimeService, subscribeRuntimeEvents } from "../discover/containerd-api.ts";
import type { KernelWatcher } from "../kernel/contract.ts";
import { createLogger } from "../log.ts";
import { followContainers, nextFollowState } from "./container-events.ts";
import { interpretContainerEvent } from "./local-containers.ts";
import { parsePolicyText } from "./policy-files.ts";
import { startStandalone } from "./standalone.ts";
import type { LocalContainer } from "./watch-plan.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function capture() {
  const lines: Record<string, unknown>[] = [];
  return { lines, logger: createLogger({}, { level: "debug", sink: (l) => lines.push(JSON.parse(l)) }) };
}

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "hive-follow-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

async function until(what: string, check: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe("following container starts and stops", () => {
  it("falls back to re-listing periodically, said once, on a runtime socket that serves no event service", async () => {
    // A gRPC server with no services answers every method UNIMPLEMENTED, as a CRI-only runtime
    // answers containerd's Events/Subscribe.
    const socket = join(tempDir(), "cri.sock");
    const server = new grpc.Server();
    await new Promise<void>((resolve, reject) =>
      server.bindAsync(`unix://${socket}`, grpc.ServerCredentials.createInsecure(), (e) =>
        e ? reject(e) : resolve(),
      ),
    );
    cleanups.push(() => void server.forceShutdown());
    const client = connectRuntimeService(socket, "events");
    cleanups.push(() => client.close());
    const log = capture();
    const reasons: string[] = [];
    const follower = followContainers({
      source: {
        client,
        subscribe: (filters) => subscribeRuntimeEvents(client, filters),
        interpret: () => undefined,
      },
      logger: log.logger,
      onChange: (change) => reasons.push(change.reason),
      pollIntervalMs: 30,
    });
    cleanups.push(() => follower.close());
    await until("three periodic re-lists", () => reasons.filter((r) => r === "periodic re-list").length >= 3);
    expect(follower.state()).toMatchObject({ mode: "polling", connected: true, pollIntervalMs: 30 });
    expect(log.lines.filter((l) => /no event service/.test(String(l.msg)))).toHaveLength(1);
    expect(log.lines.filter((l) => l.level === "warn")).toHaveLength(1);
  });

  it("ignores the exit of an exec'd process and names the container of a task start", () => {
    const decode = ((envelope: { event?: { value: unknown } | null }) => envelope.event?.value) as never;
    const at = { seconds: 1_800_000_000, nanos: 5_000_000 };
    expect(
      interpretContainerEvent(
        {
          namespace: "default",
          topic: "/tasks/exit",
          event: { type_url: "", value: { container_id: "c", id: "e1" } as never },
        },
        decode,
      ),
    ).toBeUndefined();
    expect(
      interpretContainerEvent(
        {
          namespace: "default",
          topic: "/tasks/exit",
          event: { type_url: "", value: { container_id: "c", id: "c" } as never },
        },
        decode,
      ),
    ).toEqual({ reason: "task exited: default/c" });
    expect(
      interpretContainerEvent(
        {
          timestamp: at,
          namespace: "k8s.io",
          topic: "/tasks/start",
          event: { type_url: "", value: { container_id: "c", pid: 9 } as never },
        },
        decode,
      ),
    ).toEqual({
      reason: "task started: k8s.io/c",
      started: { container: "k8s.io/c", atMs: 1_800_000_000_005 },
    });
  });

  it("coalesces a burst of container changes into at most two re-lists, and re-plans only when the containers differ", async () => {
    const dir = tempDir();
    writeFileSync(join(dir, "host-secret"), "s\n");
    const { documents } = parsePolicyText(
      "p.yaml",
      `apiVersion: hive-operator.com/v1alpha1
kind: HivePolicy
metadata:
  name: p
spec:
  traps:
    - path: ${join(dir, "host-secret")}
`,
    );
    let lists = 0;
    let syncs = 0;
    const containers: LocalContainer[] = [];
    const watcher = {
      attachMode: "kprobe",
      sync: () => {
        syncs++;
        return { notWatched: [] };
      },
      onEvent: () => undefined,
    } as unknown as KernelWatcher;
    const standalone = await startStandalone({
      documents,
      watcher,
      alerts: { handle: () => undefined },
      logger: capture().logger,
      kernelId: "k",
      listContainers: async () => {
        lists++;
        await new Promise((r) => setTimeout(r, 20));
        return containers;
      },
    });
    cleanups.push(() => standalone.close());
    expect([lists, syncs]).toEqual([1, 1]);
    const burst = Array.from({ length: 20 }, (_, i) =>
      standalone.containersChanged({ reason: `task exited: default/c${i}` }),
    );
    await Promise.all(burst);
    // The burst came before its first re-list started: one re-list for all of it, and nothing differed.
    expect(lists).toBe(2);
    expect(syncs).toBe(1);
    await standalone.replan("SIGHUP");
    expect(syncs).toBe(2);
  });

  it("says a failing re-list once, as an error with its reason, and says when re-plans work again", async () => {
    const dir = tempDir();
    writeFileSync(join(dir, "host-secret"), "s\n");
    const { documents } = parsePolicyText(
      "p.yaml",
      `apiVersion: hive-operator.com/v1alpha1
kind: HivePolicy
metadata:
  name: p
spec:
  traps:
    - path: ${join(dir, "host-secret")}
`,
    );
    let down = false;
    const log = capture();
    const standalone = await startStandalone({
      documents,
      watcher: {
        attachMode: "kprobe",
        sync: () => ({ notWatched: [] }),
        onEvent: () => undefined,
      } as unknown as KernelWatcher,
      alerts: { handle: () => undefined },
      logger: log.logger,
      kernelId: "k",
      listContainers: async () => {
        if (down) throw new Error("connect ECONNREFUSED containerd.sock");
        return [];
      },
    });
    cleanups.push(() => standalone.close());
    down = true;
    for (let i = 0; i < 3; i++) await standalone.containersChanged({ reason: "periodic re-list" });
    const failed = log.lines.filter((l) => l.msg === "re-plan failed; the previous watches stay");
    expect(failed.map((l) => l.level)).toEqual(["error", "debug", "debug"]);
    expect(failed[0]).toMatchObject({
      reason: "periodic re-list",
      error: { message: expect.stringMatching(/ECONNREFUSED/) },
    });
    down = false;
    await standalone.containersChanged({ reason: "periodic re-list" });
    expect(log.lines.some((l) => l.msg === "re-plans work again")).toBe(true);
  });
});

describe("the follower's state", () => {
  const start = {
    mode: "events" as const,
    connected: false,
    since: "t0",
    resubscribes: 0,
    lastError: "refused",
  };

  it("moves `since` only when the connection or the mode changes, and drops the error once connected", () => {
    expect(nextFollowState(start, { connected: false, lastError: "still refused" }, "t1")).toEqual({
      ...start,
      lastError: "still refused",
    });
    expect(nextFollowState(start, { connected: true, resubscribes: 1 }, "t2")).toEqual({
      mode: "events",
      connected: true,
      since: "t2",
      resubscribes: 1,
    });
    expect(
      nextFollowState(start, { mode: "polling", connected: true, pollIntervalMs: 2000 }, "t3"),
    ).toMatchObject({
      mode: "polling",
      since: "t3",
    });
  });
});
