/** Unit tests of the informer's pure steps: store deltas, LIST paging and fallbacks, watch outcomes. */
import type { KubernetesObject } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { createLogger } from "../log.ts";
import { deliver } from "./informer-handlers.ts";
import { InformerStore, listDeltas } from "./informer-store.ts";
import { listAll, listRecovery, pageParams } from "./list-pager.ts";
import { relistResourceVersion } from "./reflector.ts";
import type { ListPage, ListParams } from "./resource-lister.ts";
import { watchOutcome, watchQuery } from "./watch-session.ts";

const obj = (name: string, rv: string, namespace = "ns"): KubernetesObject => ({
  metadata: { name, namespace, resourceVersion: rv },
});
const byKey = (...objs: KubernetesObject[]) =>
  new Map(objs.map((o) => [`${o.metadata?.namespace}/${o.metadata?.name}`, o]));
const summary = (ds: { kind: string; obj: KubernetesObject }[]) =>
  ds.map((d) => `${d.kind} ${d.obj.metadata?.name}`);
const gone = { code: 410, body: { reason: "Expired", message: "too old" } };
const quiet = createLogger({}, { sink: () => {} });

describe("informer store", () => {
  it("reports adds and changed versions in list order, then deletes", () => {
    const old = byKey(obj("a", "1"), obj("b", "1"), obj("c", "1"));
    const next = byKey(obj("d", "5"), obj("a", "1"), obj("b", "4"));
    expect(summary(listDeltas(old, next))).toEqual(["add d", "update b", "delete c"]);
  });

  it("applies watch events and ignores types it does not know", () => {
    const store = new InformerStore<KubernetesObject>();
    expect(store.apply("ADDED", obj("a", "1"))?.kind).toBe("add");
    expect(store.apply("MODIFIED", obj("a", "2"))).toMatchObject({
      kind: "update",
      old: { metadata: { resourceVersion: "1" } },
    });
    expect(store.apply("SOMETHING", obj("b", "3"))).toBeUndefined();
    expect(store.get("a", "ns")?.metadata?.resourceVersion).toBe("2");
    expect(store.apply("DELETED", obj("a", "4"))?.kind).toBe("delete");
    expect(store.list()).toEqual([]);
  });

  it("filters its list by namespace", () => {
    const store = new InformerStore<KubernetesObject>();
    store.replace([obj("a", "1", "x"), obj("b", "1", "y")]);
    expect(store.list("y").map((o) => o.metadata?.name)).toEqual(["b"]);
    expect(store.list()).toHaveLength(2);
  });
});

describe("handler delivery", () => {
  it("logs a handler that throws or rejects and never throws itself", async () => {
    const lines: string[] = [];
    const log = createLogger({}, { sink: (l) => lines.push(l) });
    deliver(
      {
        add: () => {
          throw new Error("boom");
        },
      },
      { kind: "add", obj: obj("a", "1") },
      log,
    );
    deliver(
      { delete: () => Promise.reject(new Error("later")) },
      { kind: "delete", obj: obj("b", "1") },
      log,
    );
    await new Promise((r) => setImmediate(r));
    expect(lines.map((l) => JSON.parse(l).msg)).toEqual(["add handler failed", "delete handler failed"]);
  });
});

describe("list pager", () => {
  it("asks for the version only on the first page, never with a continue token", () => {
    const sel = { labelSelector: "app=x" };
    expect(pageParams({ limit: 500, continueToken: undefined, fromVersion: "0" }, sel)).toEqual({
      resourceVersion: "0",
      limit: 500,
      labelSelector: "app=x",
    });
    expect(pageParams({ limit: 500, continueToken: "t", fromVersion: "0" }, {})).toEqual({
      limit: 500,
      continueToken: "t",
    });
    expect(pageParams({ limit: undefined, continueToken: undefined, fromVersion: undefined }, {})).toEqual(
      {},
    );
  });

  it("chooses client-go's fallbacks for a refused page", () => {
    const first = { limit: 500, continueToken: undefined, fromVersion: "42" };
    expect(listRecovery(gone, { ...first, continueToken: "t" })).toBe("unpaginated");
    expect(listRecovery(gone, first)).toBe("from-storage");
    expect(listRecovery({ code: 504, body: { message: "Too large resource version: 50" } }, first)).toBe(
      "from-storage",
    );
    expect(listRecovery(gone, { ...first, fromVersion: "0" })).toBe("fail");
    expect(listRecovery({ code: 500 }, first)).toBe("fail");
  });

  it("starts over unpaginated when a continue token expires, and from storage when its version is gone", async () => {
    const calls: ListParams[] = [];
    const answers: (() => unknown)[] = [
      () => {
        throw gone;
      }, // version 42 compacted away
      () => ({ items: [obj("a", "1")], metadata: { _continue: "t1" } }),
      () => {
        throw gone;
      }, // the token's snapshot expired
      () => ({ items: [obj("a", "1"), obj("b", "2")], metadata: { resourceVersion: "99" } }),
    ];
    let refused = 0;
    const result = await listAll<KubernetesObject>(
      {
        listFn: async (p) => {
          calls.push(p);
          return (answers.shift() as () => ListPage<KubernetesObject>)();
        },
        pageSize: 1,
        transform: (o) => o,
        stats: { listPages: 0 },
        log: quiet,
        onVersionRefused: () => refused++,
      },
      "42",
    );
    expect(calls).toEqual([
      { resourceVersion: "42", limit: 1 },
      { limit: 1 },
      { limit: 1, continueToken: "t1" },
      {},
    ]);
    expect(refused).toBe(1);
    expect(result.resourceVersion).toBe("99");
    expect(result.items.map((o) => o.metadata?.name)).toEqual(["a", "b"]);
  });
});

describe("reflector steps", () => {
  it("lists from the watch cache first, then never older than it saw, then from storage", () => {
    expect(relistResourceVersion("", false)).toBe("0");
    expect(relistResourceVersion("17", false)).toBe("17");
    expect(relistResourceVersion("17", true)).toBeUndefined();
  });

  it("spreads watch timeouts over base to twice base seconds", () => {
    expect(watchQuery("5", { watchTimeoutSeconds: 100 }, () => 0).timeoutSeconds).toBe(100);
    expect(watchQuery("5", { watchTimeoutSeconds: 100, fieldSelector: "a=b" }, () => 0.999)).toEqual({
      allowWatchBookmarks: true,
      resourceVersion: "5",
      timeoutSeconds: 199,
      fieldSelector: "a=b",
    });
  });

  it("tells a re-list, a failure and a stream that ran its course apart", () => {
    const end = { err: undefined, gone: false, delivered: 0, elapsedMs: 5000 };
    expect(watchOutcome({ ...end, gone: true })).toEqual({ kind: "gone" });
    expect(watchOutcome({ ...end, err: gone })).toEqual({ kind: "gone" });
    expect(watchOutcome({ ...end, err: new Error("reset") })).toMatchObject({ kind: "error", healthy: true });
    expect(watchOutcome({ ...end, err: new Error("reset"), elapsedMs: 10 })).toMatchObject({
      healthy: false,
    });
    const timeout = Object.assign(new Error("t"), { name: "TimeoutError" });
    expect(watchOutcome({ ...end, err: timeout })).toEqual({ kind: "closed", idle: false });
    expect(watchOutcome({ ...end, elapsedMs: 10 })).toEqual({ kind: "closed", idle: true });
    expect(watchOutcome({ ...end, elapsedMs: 10, delivered: 1 })).toEqual({ kind: "closed", idle: false });
  });
});
