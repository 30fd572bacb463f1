import { describe, expect, it } from "vitest";
import type { Alert } from "../../api/alert.ts";
import { makeEvent, makeSource } from "../../test/alerts/fixtures.ts";
import { createBootClock } from "./boot-clock.ts";
import { buildAlert } from "./build-alert.ts";
import { EventGroups, startWrite } from "./pod-event-groups.ts";

const clock = createBootClock();
function alertFor(pod: string, trap: string, n: number): Alert & { pod: NonNullable<Alert["pod"]> } {
  const source = makeSource(trap);
  source.annotations.pod_name = pod;
  const alert = buildAlert(makeEvent(n, { ktimeNs: clock.nowKtimeNs() }), source, { clock });
  if (!alert.pod) throw new Error("the fixture's alert has no pod");
  return alert as Alert & { pod: NonNullable<Alert["pod"]> };
}
const always = () => true;

describe("pod Event groups", () => {
  it("groups alerts by pod, pod UID and trap, keeping the latest", () => {
    const groups = new EventGroups(16, "abc123");
    const a1 = alertFor("web-1", "trap-a", 1);
    const a2 = alertFor("web-1", "trap-a", 2);
    const g = groups.add(a1, a1.pod, "uid-1");
    expect(groups.add(a2, a2.pod, "uid-1")).toBe(g);
    expect(g).toMatchObject({ pod: "web-1", podUid: "uid-1", unwritten: 2, latest: a2, created: false });
    expect(g.name).toMatch(/^web-1\.hive-[0-9a-f]{10}$/);
    expect(groups.add(a2, a2.pod, "uid-2")).not.toBe(g);
    const b = alertFor("web-1", "trap-b", 3);
    expect(groups.add(b, b.pod, "uid-1")).not.toBe(g);
  });

  it("writes a new group at once and an existing one at most once per interval", () => {
    const groups = new EventGroups(16, "abc123");
    const a = alertFor("web-1", "trap-a", 1);
    const g = groups.add(a, a.pod, undefined);
    expect(groups.due(0, false, 1000, always).due).toEqual([g]);
    startWrite(g, 0);
    g.created = true;
    expect(groups.due(10, false, 1000, always).due).toEqual([]); // nothing unwritten
    groups.add(a, a.pod, undefined);
    expect(groups.due(500, false, 1000, always).due).toEqual([]);
    expect(groups.due(500, true, 1000, always).due).toEqual([g]);
    expect(groups.due(1000, false, 1000, always).due).toEqual([g]);
  });

  it("stops at the first group that finds no token, and says so", () => {
    const groups = new EventGroups(16, "abc123");
    for (const pod of ["p-1", "p-2", "p-3"]) {
      const a = alertFor(pod, "trap-a", 1);
      groups.add(a, a.pod, undefined);
    }
    let tokens = 2;
    const { due, throttled } = groups.due(0, false, 1000, () => tokens-- > 0);
    expect(due.map((g) => g.pod)).toEqual(["p-1", "p-2"]);
    expect(throttled).toBe(true);
  });

  it("forgets the oldest group with nothing left to write when full, never a dirty one", () => {
    const groups = new EventGroups(2, "abc123");
    const a = alertFor("p-1", "trap-a", 1);
    const b = alertFor("p-2", "trap-a", 1);
    const c = alertFor("p-3", "trap-a", 1);
    const ga = groups.add(a, a.pod, undefined);
    const gb = groups.add(b, b.pod, undefined);
    groups.add(c, c.pod, undefined); // both dirty: none forgotten
    expect(groups.due(0, true, 0, always).due).toHaveLength(3);
    startWrite(ga, 0);
    groups.add(alertFor("p-4", "trap-a", 1), alertFor("p-4", "trap-a", 1).pod, undefined);
    const pods = groups.due(0, true, 0, always).due.map((g) => g.pod);
    expect(pods).toEqual(["p-2", "p-3", "p-4"]);
    expect(groups.add(a, a.pod, undefined)).not.toBe(ga); // p-1 was forgotten
    expect(gb.unwritten).toBe(1);
  });

  it("takes the unwritten alerts for a write and derives what the Event shows", () => {
    const groups = new EventGroups(16, "abc123");
    const a = alertFor("web-1", "trap-a", 1);
    const g = groups.add(a, a.pod, undefined);
    groups.add(a, a.pod, undefined);
    g.written = 5;
    expect(startWrite(g, 42)).toEqual({ count: 7, taken: 2 });
    expect(g).toMatchObject({ unwritten: 0, lastWriteMs: 42 });
    expect(g.message).toContain("/etc/shadow");
    expect(g.last.getTime()).toBe(Date.parse(a.timestamp));
  });
});
