import { describe, expect, it } from "vitest";
import type { HiveData } from "../../api/data.ts";
import { createLogger } from "../log.ts";
import { createResolveRequests } from "./resolve-requests.ts";

const log = createLogger({}, { level: "error" });

function data(name: string): HiveData {
  return {
    apiVersion: "hive-operator.com/v1alpha1",
    kind: "HiveData",
    metadata: { name, namespace: "hive" },
    spec: { "inode-no": "1", "kernel-id": "k", device: { major: 8, minor: 1 }, accesses: ["read"] },
  };
}

/** An API whose every call the test answers: pending until resolved or rejected. */
function manualApi() {
  const calls: { name: string; requestId: string; settle: (error?: unknown) => void }[] = [];
  const send = (d: HiveData, requestId: string) =>
    new Promise<void>((resolve, reject) => {
      calls.push({
        name: d.metadata.name ?? "",
        requestId,
        settle: (error) => (error === undefined ? resolve() : reject(error)),
      });
    });
  return { calls, send };
}

const tick = () => new Promise((r) => setTimeout(r, 0));

describe("re-resolve requests", () => {
  it("never drops a request: one that comes while the previous is in flight is sent after it", async () => {
    const api = manualApi();
    const requests = createResolveRequests({ send: api.send, log });
    requests.request(data("a"));
    requests.request(data("a")); // a second replacement, milliseconds later
    expect(api.calls.map((c) => c.name)).toEqual(["a"]);
    api.calls[0]?.settle();
    await tick();
    expect(api.calls.map((c) => c.name)).toEqual(["a", "a"]);
    // Each request is a new value: the owner re-resolves on every one.
    expect(api.calls[1]?.requestId).not.toEqual(api.calls[0]?.requestId);
    api.calls[1]?.settle();
    await tick();
    expect(requests.pending()).toBe(0);
    requests.stop();
  });

  it("coalesces any number of requests made during one send into one more send", async () => {
    const api = manualApi();
    const requests = createResolveRequests({ send: api.send, log });
    for (let i = 0; i < 5; i++) requests.request(data("a"));
    requests.request(data("b"));
    expect(api.calls.map((c) => c.name)).toEqual(["a", "b"]);
    for (const c of api.calls.slice()) c.settle();
    await tick();
    expect(api.calls.map((c) => c.name)).toEqual(["a", "b", "a"]);
    api.calls[2]?.settle();
    await tick();
    expect(api.calls).toHaveLength(3);
    requests.stop();
  });

  it("retries a failed send with backoff until it goes through", async () => {
    const api = manualApi();
    const requests = createResolveRequests({
      send: api.send,
      log,
      backoff: { baseMs: 5, maxMs: 20 },
      random: () => 1,
    });
    requests.request(data("a"));
    api.calls[0]?.settle(new Error("503 from the API server"));
    await new Promise((r) => setTimeout(r, 30));
    expect(api.calls).toHaveLength(2);
    api.calls[1]?.settle(new Error("timeout"));
    await new Promise((r) => setTimeout(r, 40));
    expect(api.calls).toHaveLength(3);
    api.calls[2]?.settle();
    await tick();
    expect(requests.pending()).toBe(0);
    requests.stop();
  });

  it("does not retry what no retry can change (Forbidden), and forgets deleted objects", async () => {
    const api = manualApi();
    const forbidden = new Error("forbidden");
    const requests = createResolveRequests({
      send: api.send,
      log,
      isPermanent: (e) => e === forbidden,
      backoff: { baseMs: 1, maxMs: 1 },
    });
    requests.request(data("a"));
    api.calls[0]?.settle(forbidden);
    await new Promise((r) => setTimeout(r, 10));
    expect(api.calls).toHaveLength(1);
    expect(requests.pending()).toBe(0);
    requests.request(data("b"));
    requests.request(data("b"));
    requests.forget("hive/b");
    api.calls[1]?.settle();
    await tick();
    expect(api.calls.map((c) => c.name)).toEqual(["a", "b"]);
    requests.stop();
  });

  it("hands a request to the local discover when it owns the object: nothing goes to the API server", () => {
    const api = manualApi();
    const local: string[] = [];
    const requests = createResolveRequests({
      send: api.send,
      log,
      local: (d) => {
        if (d.metadata.name !== "mine") return false;
        local.push(d.metadata.name);
        return true;
      },
    });
    requests.request(data("mine"));
    requests.request(data("mine"));
    requests.request(data("other-node"));
    expect(local).toEqual(["mine", "mine"]);
    expect(api.calls.map((c) => c.name)).toEqual(["other-node"]);
    requests.stop();
  });
});
