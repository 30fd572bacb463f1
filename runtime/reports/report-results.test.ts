import type { V1Pod } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import type { HiveData } from "../../api/data.ts";
import { trapId } from "../../api/ids.ts";
import type { HivePolicy } from "../../api/policy.ts";
import { UNSAFE_TEXT } from "../../test/fixtures/hostile-text.ts";
import { type FailRecord, type ReportInputs, reportResults } from "./report-results.ts";

const policy: HivePolicy = {
  apiVersion: "hive-operator.com/v1alpha1",
  kind: "HivePolicy",
  metadata: { name: "p", namespace: "hive-system" },
  spec: { traps: [{ path: "/etc/shadow", severity: "critical" }, { path: "/etc/passwd" }] },
};
const [shadow, passwd] = policy.spec.traps.map((t) => trapId({ namespace: "hive-system", name: "p" }, t));
const armed = (trap: string | undefined, namespace: string, pod: string): HiveData =>
  ({
    metadata: {
      labels: {
        "trap-id": trap,
        "hive-operator.com/policy": "p",
        "hive-operator.com/policy-namespace": "hive-system",
      },
      annotations: { namespace, pod_name: pod, pod_uid: `uid-${pod}`, container_name: "app" },
    },
  }) as unknown as HiveData;
const HOUR = 3_600_000;
const now = Date.parse("2026-11-27T12:00:00Z");
const fail = (pod: string, ageMs: number, extra: Partial<FailRecord> = {}): FailRecord => ({
  policy: "hive-system/p",
  trapId: shadow ?? "",
  namespace: "team-a",
  pod,
  count: 2,
  lastAccess: now - ageMs,
  accesses: "read",
  exe: "/usr/bin/cat",
  parentExe: "/bin/sh",
  alertId: "0b9f5a6e-1d1f-4c51-9d7a-3f1c2b9e8a71",
  events: { "team-a/x": 2 },
  ...extra,
});
const inputs = (over: Partial<ReportInputs>): ReportInputs => ({
  policies: [policy],
  data: [],
  trapErrors: [],
  uncovered: [],
  platformNamespace: "hive-system",
  fails: [],
  now,
  failWindowMs: 168 * HOUR,
  ...over,
});
const byPod = (results: ReturnType<typeof reportResults>, ns: string, trap = "/etc/shadow") =>
  Object.fromEntries(
    (results.get(ns) ?? []).filter((r) => r.rule === trap).map((r) => [r.resources?.[0]?.name, r.result]),
  );

describe("report results", () => {
  it("fail for a pod accessed within the window, pass again after it, in the pod's namespace", () => {
    const data = [
      armed(shadow, "team-a", "web-1"),
      armed(shadow, "team-a", "web-2"),
      armed(passwd, "team-b", "db"),
    ];
    const out = reportResults(
      inputs({ data, fails: [fail("web-1", 167 * HOUR), fail("web-2", 169 * HOUR)] }),
    );
    expect(byPod(out, "team-a")).toEqual({ "web-1": "fail", "web-2": "pass" });
    expect(byPod(out, "team-b", "/etc/passwd")).toEqual({ db: "pass" });
    const [first] = out.get("team-a") ?? [];
    expect(first).toMatchObject({
      result: "fail",
      severity: "critical",
      message:
        "read by /usr/bin/cat (parent /bin/sh), 2 times, last 2026-11-20T13:00:00.000Z; alert 0b9f5a6e-1d1f-4c51-9d7a-3f1c2b9e8a71",
      timestamp: { seconds: (now - 167 * HOUR) / 1000, nanos: 0 },
      resources: [{ apiVersion: "v1", kind: "Pod", namespace: "team-a", name: "web-1", uid: "uid-web-1" }],
    });
    expect(out.get("team-b")?.[0]?.severity).toBe("medium");
  });

  it("error over pass, skip for a pod on a node without an agent, and nothing for a deleted policy's fail", () => {
    const uncovered = {
      metadata: { name: "lost", namespace: "team-c" },
      spec: { nodeName: "n9", containers: [{ name: "app" }] },
      status: { containerStatuses: [{ name: "app", containerID: "containerd://x", state: { running: {} } }] },
    } as unknown as V1Pod;
    const out = reportResults(
      inputs({
        data: [armed(shadow, "team-a", "web-1")],
        trapErrors: [
          {
            policyNamespace: "hive-system",
            policyName: "p",
            trapId: shadow ?? "",
            pod: "web-1",
            podNamespace: "team-a",
            container: "side",
            reason: "PathEscapesContainer",
            message: "a symlink leads out",
          },
        ],
        uncovered: [uncovered],
        fails: [fail("web-9", HOUR, { policy: "hive-system/gone" })],
      }),
    );
    expect(byPod(out, "team-a")).toEqual({ "web-1": "error" });
    expect(out.get("team-a")?.[0]?.message).toBe("PathEscapesContainer: container side: a symlink leads out");
    expect(byPod(out, "team-c")).toEqual({ lost: "skip" });
    expect(out.get("team-c")?.[0]?.message).toMatch(/no ready Hive agent on node n9/);
  });

  it("escapes and bounds what the container chose: the executable in the message and properties", () => {
    const out = reportResults(
      inputs({
        data: [armed(shadow, "team-a", "web-1")],
        fails: [fail("web-1", HOUR, { exe: `/tmp/\x1b[31mcat\u202e\n${"x".repeat(5000)}` })],
      }),
    );
    const r = out.get("team-a")?.[0];
    expect(r?.message).not.toMatch(UNSAFE_TEXT);
    expect(r?.properties?.exe).not.toMatch(UNSAFE_TEXT);
    expect(r?.properties?.exe?.length).toBeLessThanOrEqual(256);
  });
});
