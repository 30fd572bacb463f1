import type { CoreV1Api } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import type { Alert } from "../../api/alert.ts";
import { captureLogger, makeEvent, makeSource } from "../../test/alerts/fixtures.ts";
import { createBootClock } from "./boot-clock.ts";
import { buildAlert } from "./build-alert.ts";
import { EVENT_REASON } from "./pod-event-content.ts";
import { EventGroups, type Group } from "./pod-event-groups.ts";
import { PodEventWriter } from "./pod-event-writer.ts";

const clock = createBootClock();
const apiError = (code: number) => Object.assign(new Error(`HTTP ${code}`), { code });

/** A CoreV1Api that records Event writes and answers each with the next scripted status (0 or none: success). */
function fakeCore(answers: { create?: number[]; patch?: number[] } = {}) {
  const calls: { verb: "create" | "patch"; body: unknown }[] = [];
  const answer = async (verb: "create" | "patch", body: unknown) => {
    calls.push({ verb, body });
    const code = answers[verb]?.shift();
    if (code) throw apiError(code);
    return {};
  };
  const core = {
    createNamespacedEvent: ({ body }: { body: unknown }) => answer("create", body),
    patchNamespacedEvent: ({ body }: { body: unknown }) => answer("patch", body),
  } as unknown as CoreV1Api;
  return { core, calls };
}

function groupWith(alerts: number): Group {
  const groups = new EventGroups(16, "abc123");
  const source = makeSource("trap-a");
  let g: Group | undefined;
  for (let n = 1; n <= alerts; n++) {
    const alert: Alert = buildAlert(makeEvent(n, { ktimeNs: clock.nowKtimeNs() }), source, { clock });
    g = groups.add(alert, alert.pod as NonNullable<Alert["pod"]>, "uid-1");
  }
  return g as Group;
}

describe("pod Event writes", () => {
  it("creates the group's Event, then raises its count by a patch", async () => {
    const { core, calls } = fakeCore();
    const writer = new PodEventWriter({ core, nodeName: "node-a", logger: captureLogger().logger });
    const g = groupWith(3);
    await writer.write(g);
    expect(calls.map((c) => c.verb)).toEqual(["create"]);
    expect(calls[0]?.body).toMatchObject({
      reason: EVENT_REASON,
      count: 3,
      involvedObject: { kind: "Pod", uid: "uid-1" },
    });
    expect(g).toMatchObject({ created: true, written: 3, unwritten: 0 });
    g.unwritten = 2;
    await writer.write(g);
    expect(calls.map((c) => c.verb)).toEqual(["create", "patch"]);
    expect(calls[1]?.body).toContainEqual({ op: "replace", path: "/count", value: 5 });
    expect(g.written).toBe(5);
  });

  it("patches an Event that exists already, and creates again one that expired with only the new alerts", async () => {
    const { core, calls } = fakeCore({ create: [409], patch: [0, 404] });
    const writer = new PodEventWriter({ core, nodeName: "node-a", logger: captureLogger().logger });
    const g = groupWith(2);
    await writer.write(g);
    expect(calls.map((c) => c.verb)).toEqual(["create", "patch"]);
    expect(g).toMatchObject({ created: true, written: 2 });
    g.unwritten = 1;
    await writer.write(g);
    expect(calls.map((c) => c.verb)).toEqual(["create", "patch", "patch", "create"]);
    expect(calls[3]?.body).toMatchObject({ count: 1 });
    expect(g.written).toBe(1);
    expect(g.first).toEqual(g.last);
  });

  it("keeps the alerts of a failed write for the next one, and logs it", async () => {
    const { core } = fakeCore({ create: [500] });
    const { logger, lines } = captureLogger();
    const writer = new PodEventWriter({ core, nodeName: "node-a", logger });
    const g = groupWith(2);
    await writer.write(g);
    expect(g).toMatchObject({ created: false, written: 0, unwritten: 2 });
    expect(lines.some((l) => l.msg === "cannot write a Kubernetes Event for an alert")).toBe(true);
  });
});
