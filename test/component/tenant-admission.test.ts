/**
 * The tenant-scope ValidatingAdmissionPolicy evaluated as the API server would (its CEL run by
 * an independent evaluator): a HivePolicy outside the monitor's namespace may not name another
 * namespace in any trap's match, and the denial says why and what to do.
 */
import { evaluate } from "@marcbachmann/cel-js";
import { describe, expect, it } from "vitest";
import { TENANT_POLICY_NAME } from "../../component/builders/admission.ts";
import { renderManifests } from "../../component/index.ts";
import { MINIMAL } from "./configs.ts";

const objects = renderManifests({
  ...MINIMAL,
  callback: { url: "https://alerts.example.com/hive" },
  tenantCallbacks: ["https://teams.example.com", "https://alerts.example.com/teams/"],
});
const vap = objects.find(
  (o) => o.kind === "ValidatingAdmissionPolicy" && o.metadata.name === TENANT_POLICY_NAME,
);
const spec = vap?.spec as {
  matchConstraints: { resourceRules: { resources: string[]; operations: string[] }[] };
  validations: { expression: string; message?: string; messageExpression?: string }[];
};

function admit(namespace: string, traps: unknown[], operation = "CREATE"): string {
  const rule = spec.matchConstraints.resourceRules.find((r) => r.resources.includes("hivepolicies"));
  if (!rule?.operations.includes(operation)) return "not matched";
  const object = { metadata: { name: "p", namespace }, spec: { traps } };
  for (const v of spec.validations)
    if (evaluate(v.expression, { object }) !== true)
      return v.messageExpression ? String(evaluate(v.messageExpression, { object })) : String(v.message);
  return "allowed";
}

describe("tenant scope at admission", () => {
  it("is rendered and bound to deny", () => {
    expect(vap).toBeDefined();
    const binding = objects.find(
      (o) => o.kind === "ValidatingAdmissionPolicyBinding" && o.metadata.name === TENANT_POLICY_NAME,
    );
    expect(binding?.spec).toEqual({ policyName: TENANT_POLICY_NAME, validationActions: ["Deny"] });
  });

  it("lets a tenant trap its own namespace, and the platform namespace reach any", () => {
    expect(admit("team-a", [{ path: "/etc/shadow" }])).toBe("allowed");
    expect(admit("team-a", [{ path: "/etc/shadow", match: { namespace: "team-a", pod: "web" } }])).toBe(
      "allowed",
    );
    expect(admit("team-a", [{ path: "/etc/shadow", match: { matchLabels: { app: "x" } } }])).toBe("allowed");
    expect(admit("hive-system", [{ path: "/etc/shadow", match: { namespace: "kube-system" } }])).toBe(
      "allowed",
    );
  });

  it("rejects a tenant policy that names another namespace, on create and on update, saying why", () => {
    const traps = [{ path: "/etc/shadow" }, { path: "/etc/hostname", match: { namespace: "kube-system" } }];
    for (const operation of ["CREATE", "UPDATE"]) {
      const answer = admit("team-a", traps, operation);
      expect(answer).toContain(
        "a HivePolicy outside hive-system traps only pods of its own namespace (team-a)",
      );
      expect(answer).toContain("remove match.namespace or set it to team-a");
    }
  });

  it("lets a tenant trap send alerts only to the monitor's callback or under its tenantCallbacks", () => {
    const trap = (callback: string) => [{ path: "/etc/shadow", callback }];
    expect(admit("team-a", trap("https://alerts.example.com/hive"))).toBe("allowed");
    expect(admit("team-a", trap("https://teams.example.com/team-a"))).toBe("allowed");
    expect(admit("team-a", trap("https://alerts.example.com/teams/a"))).toBe("allowed");
    for (const url of [
      "http://kube-dns.kube-system.svc:53/",
      "https://teams.example.com.evil.io/x", // a bare origin is a prefix up to its "/"
      "https://alerts.example.com/hive-other",
    ]) {
      expect(admit("team-a", trap(url))).toContain("may send alerts only to the monitor's callback");
    }
    expect(admit("hive-system", trap("http://anything.internal/"))).toBe("allowed");
  });
});

describe("tenant callbacks at admission, with URLs that hold CEL's quote and escape characters", () => {
  it("compares them as data: a quote in the monitor's URL neither breaks the rule nor opens it", () => {
    const monitorUrl = "https://alerts.example.com/hive?q='||true||'\\";
    const rendered = renderManifests({ ...MINIMAL, callback: { url: monitorUrl } });
    const tenant = rendered.find(
      (o) => o.kind === "ValidatingAdmissionPolicy" && o.metadata.name === TENANT_POLICY_NAME,
    )?.spec as typeof spec;
    const admits = (callback: string) => {
      const object = {
        metadata: { name: "p", namespace: "team-a" },
        spec: { traps: [{ path: "/f", callback }] },
      };
      return tenant.validations.every((v) => evaluate(v.expression, { object }) === true);
    };
    expect(admits(monitorUrl)).toBe(true);
    expect(admits("https://attacker.example/")).toBe(false);
  });
});
