import { describe, expect, it } from "vitest";
import type { HiveTrap } from "../../api/index.ts";
import { policy, useHostRoot } from "../../test/standalone/plan-fixtures.ts";
import { nothingSaid, type PlanLogContext, reportPlan } from "./plan-log.ts";
import { planWatches, trapRefs, type WatchPlan } from "./watch-plan.ts";

const context = (over: Partial<PlanLogContext> = {}): PlanLogContext => ({
  reason: "start",
  taskStarts: new Map(),
  armedAtMs: 0,
  runtime: { listed: true, followed: true },
  ...over,
});

describe("what a plan says in the log", () => {
  const rootOf = useHostRoot("hive-plan-log-");
  const planOf = (traps: HiveTrap[]): WatchPlan =>
    planWatches(trapRefs([{ file: "p.yaml", index: 1, policy: policy("p", traps) }]), {
      kernelId: "k",
      hostRoot: rootOf(),
    });

  it("says each armed file and each trap not watched once, not again on every re-plan", () => {
    const plan = planOf([{ path: "/etc/shadow" }, { path: "/etc/later" }]);
    const first = reportPlan(nothingSaid(), plan, context());
    expect(first.lines.map((l) => [l.level, l.msg])).toEqual([
      ["info", "watching"],
      ["warn", "trap not watched"],
    ]);
    expect(first.lines[0]?.fields).toMatchObject({
      policy: "p",
      path: "/etc/shadow",
      target: "host",
      reason: "start",
    });
    expect(first.lines[1]?.fields).toHaveProperty("waitingIn");
    const again = reportPlan(
      first.said,
      planOf([{ path: "/etc/shadow" }, { path: "/etc/later" }]),
      context(),
    );
    expect(again.lines).toEqual([]);
  });

  it("tells a trap that matches no container what arms it", () => {
    const plan = planOf([{ path: "/etc/shadow", match: { "container-name": "web" } }]);
    const hint = (runtime: PlanLogContext["runtime"]) =>
      reportPlan(nothingSaid(), plan, context({ runtime })).lines.find(
        (l) => l.msg === "trap matches no container",
      )?.fields.hint;
    expect(hint({ listed: false, followed: false })).toMatch(/no container runtime is reachable/);
    expect(hint({ listed: true, followed: true })).toBe("it is armed as soon as a matching container starts");
    expect(hint({ listed: true, followed: false })).toMatch(/SIGHUP/);
  });
});
