import type { CoreV1Event } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { createLogger } from "../log.ts";
import { createAccessOrigin, type PodPlacement } from "./access-origin.ts";

const event = (name: string, pod: string, node: string, count: number, uid?: string): CoreV1Event => ({
  metadata: { name, namespace: "ns" },
  involvedObject: { kind: "Pod", name: pod, namespace: "ns", ...(uid ? { uid } : {}) },
  reportingInstance: node,
  count,
});

/** An origin check over `pods` (what the API server would answer), recording what it folds. */
function origin(pods: Map<string, PodPlacement | Error>) {
  const folded: string[] = [];
  let lookups = 0;
  const o = createAccessOrigin({
    lookup: async (_ns, name) => {
      lookups += 1;
      const p = pods.get(name);
      if (p instanceof Error) throw p;
      return p;
    },
    fold: (type, ev) => folded.push(`${type} ${ev.metadata?.name} ${ev.count}`),
    onFolded: () => {},
    log: createLogger({}, { level: "error", sink: () => {} }),
  });
  return { o, folded, lookups: () => lookups };
}
const settle = () => new Promise((r) => setImmediate(r));

describe("an access Event's origin", () => {
  it("folds a pod's Events in order after one lookup, and only those of the pod's node", async () => {
    const { o, folded, lookups } = origin(new Map([["web", { node: "a", uid: "u1" }]]));
    o.check("ADDED", event("e1", "web", "a", 1));
    o.check("ADDED", event("forged", "web", "b", 9));
    o.check("MODIFIED", event("e1", "web", "a", 2));
    expect(folded).toEqual([]);
    await settle();
    o.check("MODIFIED", event("e1", "web", "a", 3, "u1"));
    expect(folded).toEqual(["ADDED e1 1", "MODIFIED e1 2", "MODIFIED e1 3"]);
    expect(lookups()).toBe(1);
    expect(o.rejected).toBe(1);
  });

  it("looks a pod up again when an Event names another uid (a pod recreated under the same name)", async () => {
    const pods = new Map<string, PodPlacement | Error>([["db-0", { node: "a", uid: "old" }]]);
    const { o, folded, lookups } = origin(pods);
    o.check("ADDED", event("e1", "db-0", "a", 1, "old"));
    await settle();
    pods.set("db-0", { node: "b", uid: "new" });
    o.check("ADDED", event("e2", "db-0", "b", 1, "new"));
    // An Event naming the old pod's uid, written by its old node after the move, no longer counts.
    o.check("MODIFIED", event("e1", "db-0", "a", 2, "old"));
    await settle();
    expect(folded).toEqual(["ADDED e1 1", "ADDED e2 1"]);
    expect(lookups()).toBe(2);
  });

  it("counts no Event of a pod that does not exist, and asks again after a failed lookup", async () => {
    const pods = new Map<string, PodPlacement | Error>([["web", new Error("connection refused")]]);
    const { o, folded } = origin(pods);
    o.check("ADDED", event("e1", "web", "a", 1));
    o.check("ADDED", event("ghost", "nobody", "a", 1));
    await settle();
    expect(folded).toEqual([]);
    pods.set("web", { node: "a" });
    o.check("MODIFIED", event("e1", "web", "a", 2));
    await settle();
    expect(folded).toEqual(["MODIFIED e1 2"]);
    // Removals only forget: folded whatever their origin.
    o.check("DELETED", event("ghost", "nobody", "a", 1));
    expect(folded).toEqual(["MODIFIED e1 2", "DELETED ghost 1"]);
  });
});
