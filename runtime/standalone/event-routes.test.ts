import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeEach, describe, expect, it } from "vitest";
import type { HiveTrap } from "../../api/index.ts";
import { makeEvent } from "../../test/alerts/fixtures.ts";
import { policy, useHostRoot } from "../../test/standalone/plan-fixtures.ts";
import { RETIRED_SLOT_MS, retireSlots, routeEvent } from "./event-routes.ts";
import { planWatches, trapRefs } from "./watch-plan.ts";
import { buildWatchTable, counterSlots, type WatchTable } from "./watch-table.ts";

describe("routing kernel events by slot", () => {
  const rootOf = useHostRoot("hive-routes-");
  const slots = counterSlots();
  const tableOf = (traps: HiveTrap[]): WatchTable =>
    buildWatchTable(
      planWatches(trapRefs([{ file: "p.yaml", index: 1, policy: policy("p", traps) }]), {
        kernelId: "k",
        hostRoot: rootOf(),
      }),
      slots,
    );
  beforeEach(() => writeFileSync(join(rootOf(), "etc/other"), "y"));

  const slotOf = (table: WatchTable, kind: "file" | "parent") =>
    table.entries.find((e) => e.kind === kind)?.slot ?? -1;

  it("alerts the traps on a file, and follows the file when its name now names another", () => {
    const table = tableOf([{ path: "/etc/shadow", accesses: ["read"] }]);
    const slot = slotOf(table, "file");
    const read = routeEvent(makeEvent(1, { slot, accesses: ["read"] }), table, new Map());
    expect(read).toMatchObject({ to: "alerts", sources: [{ annotations: { path: "/etc/shadow" } }] });
    expect(read).not.toHaveProperty("follow");
    const renamed = routeEvent(makeEvent(1, { slot, accesses: [], change: "renamed" }), table, new Map());
    expect(renamed).toMatchObject({ to: "alerts", follow: "file renamed" });
    // A truncation keeps the inode: nothing to follow.
    const truncated = routeEvent(makeEvent(1, { slot, accesses: [], change: "truncated" }), table, new Map());
    expect(truncated).not.toHaveProperty("follow");
  });

  it("re-plans when a trapped file's directory changed", () => {
    const table = tableOf([{ path: "/etc/shadow" }]);
    const event = makeEvent(1, { slot: slotOf(table, "parent"), kind: "parent", accesses: ["write"] });
    expect(routeEvent(event, table, new Map())).toEqual({ to: "replan", reason: "directory changed" });
  });

  it("still routes a slot a re-plan removed for a while, then no more", () => {
    const before = tableOf([{ path: "/etc/shadow" }]);
    const after = tableOf([{ path: "/etc/other" }]);
    const slot = slotOf(before, "file");
    const event = makeEvent(1, { slot, accesses: ["read"] });
    expect(routeEvent(event, after, new Map())).toEqual({ to: "nowhere" });
    const retired = retireSlots(new Map(), before, after, 1000);
    expect(routeEvent(event, after, retired)).toMatchObject({ to: "alerts", sources: [{}] });
    // Expired, or given back to the table: no longer held.
    expect(retireSlots(retired, after, after, 1000 + RETIRED_SLOT_MS).has(slot)).toBe(false);
    expect(retireSlots(retired, after, before, 1001).has(slot)).toBe(false);
    expect(retireSlots(retired, after, after, 1001).get(slot)?.until).toBe(1000 + RETIRED_SLOT_MS);
  });
});
