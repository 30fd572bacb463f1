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

const objects = renderManifests(MINIMAL);
const vap = objects.find(
  (o) => o.kind === "ValidatingAdmissionPolicy" && o.metadata.name === TENANT_POLICY_NAME,
);
const spec = vap?.spec as {
  matchConstraints: { resourceRules: { resources: string[]; operations: string[] }[] };
  validations: { expression: string; messageExpression: string }[];
};

function admit(namespace: string, traps: unknown[], operation = "CREATE"): string {
  const rule = spec.matchConstraints.resourceRules.find((r) => r.resources.includes("hivepolicies"));
  if (!rule?.operations.includes(operation)) return "not matched";
  const object = { metadata: { name: "p", namespace }, spec: { traps } };
  for (const v of spec.validations)
    if (evaluate(v.expression, { object }) !== true) return String(evaluate(v.messageExpression, { object }));
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
});
