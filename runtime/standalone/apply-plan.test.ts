import { rmSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { policy, useHostRoot } from "../../test/standalone/plan-fixtures.ts";
import type { KernelWatcher, WatchEntry } from "../kernel/contract.ts";
import { createLogger } from "../log.ts";
import {
  applyPlan,
  assertSomethingToWatch,
  fingerprint,
  initialPlanState,
  type PlanOptions,
} from "./apply-plan.ts";
import { type LocalContainer, planWatches, trapRefs } from "./watch-plan.ts";
import { counterSlots } from "./watch-table.ts";

const container = (id: string, pid: number): LocalContainer => ({
  id,
  name: id,
  pid,
  runtimeNamespace: "default",
  labels: {},
});

describe("one plan applied", () => {
  const rootOf = useHostRoot("hive-apply-");

  it("syncs the kernel map to the plan, says what changed once, and retires the slots it removed", () => {
    const synced: WatchEntry[][] = [];
    const lines: Record<string, unknown>[] = [];
    const options: PlanOptions = {
      watcher: { sync: (entries: WatchEntry[]) => void synced.push(entries) } as unknown as KernelWatcher,
      alerts: { handle: () => {} },
      logger: createLogger({}, { sink: (l) => lines.push(JSON.parse(l)) }),
      kernelId: "k",
    };
    const path = join(rootOf(), "etc/shadow");
    const documents = [{ file: "p.yaml", index: 1, policy: policy("p", [{ path }]) }];
    const planner = { refs: trapRefs(documents), slotFor: counterSlots() };
    const state = initialPlanState("k");
    applyPlan(options, state, planner, "start", []);
    expect(state.context).toMatchObject({ kernelId: "k", containers: [] });
    expect(synced.at(-1)?.map((e) => e.kind)).toEqual(["file", "parent"]);
    applyPlan(options, state, planner, "SIGHUP", []);
    expect(lines.map((l) => l.msg)).toEqual(["watching"]);
    const fileSlot = synced.at(-1)?.find((e) => e.kind === "file")?.slot ?? -1;
    rmSync(path);
    applyPlan(options, state, planner, "file deleted", []);
    expect(synced.at(-1)?.map((e) => e.kind)).toEqual(["parent"]);
    expect(state.retired.get(fileSlot)?.info.kind).toBe("file");
    expect(lines.map((l) => l.msg)).toEqual(["watching", "trap not watched"]);
  });

  it("fingerprints which containers run with which init PID, in any order", () => {
    expect(fingerprint([container("a", 1), container("b", 2)])).toBe(
      fingerprint([container("b", 2), container("a", 1)]),
    );
    expect(fingerprint([container("a", 1)])).not.toBe(fingerprint([container("a", 3)]));
  });

  it("refuses a first plan with nothing to watch, unless a trap waits for a container to start", () => {
    const refs = trapRefs([
      {
        file: "p.yaml",
        index: 1,
        policy: policy("p", [{ path: "/etc/later", match: { "container-name": "web" } }]),
      },
    ]);
    const plan = planWatches(refs, { kernelId: "k", hostRoot: rootOf(), containers: [] });
    const documents = [{ file: "p.yaml", index: 1, policy: policy("p", []) }] as never;
    expect(() => assertSomethingToWatch({ documents }, plan)).toThrow(
      "no trapped file could be resolved: nothing to watch",
    );
    expect(() => assertSomethingToWatch({ documents, containerEvents: {} as never }, plan)).not.toThrow();
  });
});
