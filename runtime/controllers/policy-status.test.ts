import { describe, expect, it } from "vitest";
import type { HiveData } from "../../api/data.ts";
import { trapId } from "../../api/ids.ts";
import type { HivePolicy } from "../../api/policy.ts";
import { validatePolicy } from "../../api/validate.ts";
import { UNSAFE_TEXT } from "../../test/fixtures/hostile-text.ts";
import { computePolicyStatus, sameStatus } from "./policy-status.ts";
import type { NodeTrapError } from "./ports.ts";

const policy: HivePolicy = {
  apiVersion: "hive-operator.com/v1alpha1",
  kind: "HivePolicy",
  metadata: { name: "p", namespace: "hive", generation: 3 },
  spec: {
    traps: [{ path: "/etc/shadow" }, { path: "/missing" }, { path: "/x", match: { "container-name": "(" } }],
  },
};
const ids = policy.spec.traps.map((t) => trapId({ namespace: "hive", name: "p" }, t));
const found = (pod: string) =>
  ({ metadata: { annotations: { pod_name: pod, container_name: "app" } } }) as unknown as HiveData;
const missing = (node: string, pod: string): NodeTrapError => ({
  node,
  pod,
  container: "app",
  reason: "FileNotFound",
  message: "gone",
  policyNamespace: "hive",
  policyName: "p",
  trapId: ids[1] ?? "",
});

describe("policy status", () => {
  it("counts matched containers and inodes per trap and names every error", () => {
    const status = computePolicyStatus(
      policy,
      new Map([[ids[0] ?? "", [found("a"), found("b")]]]),
      new Map([[ids[1] ?? "", [missing("n2", "b"), missing("n1", "a")]]]),
      new Date("2026-01-01T00:00:00Z"),
    );
    expect(status.observedGeneration).toBe(3);
    expect(status.matchedContainers).toBe(4);
    expect(status.traps?.map((t) => [t.matchedContainers, t.inodesFound])).toEqual([
      [2, 2],
      [2, 0],
      [0, 0],
    ]);
    expect(status.traps?.[1]?.errors?.map((e) => e.node)).toEqual(["n1", "n2"]);
    expect(status.traps?.[2]?.errors?.[0]?.reason).toBe("InvalidRegex");
    expect(status.conditions?.[0]).toMatchObject({
      type: "Ready",
      status: "False",
      reason: "TrapErrors",
      observedGeneration: 3,
    });
  });

  it("keeps the transition time while the condition holds, and needs no write when nothing changed", () => {
    const ok: HivePolicy = { ...policy, spec: { traps: [{ path: "/etc/shadow" }] } };
    const first = computePolicyStatus(
      ok,
      new Map([[ids[0] ?? "", [found("a")]]]),
      new Map(),
      new Date("2026-01-01T00:00:00Z"),
    );
    expect(first.conditions?.[0]).toMatchObject({ status: "True", reason: "TrapsWatched" });
    // What the writer stores is valid against the one schema.
    expect(validatePolicy({ ...ok, status: first })).toMatchObject({ ok: true });
    const later = computePolicyStatus(
      { ...ok, status: first },
      new Map([[ids[0] ?? "", [found("a")]]]),
      new Map(),
      new Date("2026-02-01T00:00:00Z"),
    );
    expect(later.conditions?.[0]?.lastTransitionTime).toBe("2026-01-01T00:00:00.000Z");
    expect(sameStatus(first, later)).toBe(true);
    const none = computePolicyStatus(
      { ...ok, status: first },
      new Map(),
      new Map(),
      new Date("2026-03-01T00:00:00Z"),
    );
    expect(none.conditions?.[0]).toMatchObject({ status: "True", reason: "NoMatchingContainers" });
    expect(sameStatus(first, none)).toBe(false);
  });
});

describe("text a container chose, as a node reported it", () => {
  it("is shown escaped, on one line and bounded, whatever the node sent", () => {
    const hostile = {
      ...missing("n1", "a"),
      message: `FileNotFound: /etc/shadow -> /\n\x1b[31mERROR\u202e${"x".repeat(4096)} does not exist`,
    };
    const status = computePolicyStatus(policy, new Map(), new Map([[ids[1] ?? "", [hostile]]]));
    const message = status.traps?.[1]?.errors?.[0]?.message ?? "";
    expect(message).not.toMatch(UNSAFE_TEXT);
    expect(message.length).toBeLessThanOrEqual(1024);
    expect(message.startsWith("FileNotFound: /etc/shadow -> /\\n\\x1b[31mERROR\\u202exxx")).toBe(true);
  });
});

describe("a policy the CRD should have rejected", () => {
  it("is reported as PolicyInvalid instead of breaking the controllers", async () => {
    const { specProblems } = await import("./ports.ts");
    const { invalidPolicyStatus } = await import("./policy-status.ts");
    const broken = { ...policy, spec: { traps: [{ path: "relative" }] } } as HivePolicy;
    const problems = specProblems(broken);
    expect(problems).toContain("traps[0].path");
    expect(specProblems(policy)).toBeUndefined();
    const status = invalidPolicyStatus(broken, problems ?? "");
    expect(status.conditions?.[0]).toMatchObject({ status: "False", reason: "PolicyInvalid" });
  });
});
