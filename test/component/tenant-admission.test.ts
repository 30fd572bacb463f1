/**
 * The tenant-scope ValidatingAdmissionPolicy evaluated as the API server would (its CEL run by
 * an independent evaluator): a HivePolicy outside the monitor's namespace may not name another
 * namespace in any trap's match, nor a callback outside the monitor's tenantCallbacks, and the
 * denial says why and what to do. The monitor's own callback URL appears in no policy.
 */
import { evaluate } from "@marcbachmann/cel-js";
import { describe, expect, it } from "vitest";
import { tenantCallbackAllowed } from "../../api/tenancy.ts";
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

  it("lets a tenant trap name a callback only under the monitor's tenantCallbacks", () => {
    const trap = (callback: string) => [{ path: "/etc/shadow", callback }];
    expect(admit("team-a", [{ path: "/etc/shadow" }])).toBe("allowed"); // to the monitor's callback
    expect(admit("team-a", trap("https://teams.example.com/team-a"))).toBe("allowed");
    expect(admit("team-a", trap("https://alerts.example.com/teams/a"))).toBe("allowed");
    for (const url of [
      "https://alerts.example.com/hive", // the monitor's own: a tenant leaves callback out instead
      "http://kube-dns.kube-system.svc:53/",
      "https://teams.example.com.evil.io/x", // a bare origin is a prefix up to its "/"
      "https://alerts.example.com/hive-other",
    ]) {
      expect(admit("team-a", trap(url))).toContain("may name a trap callback only under");
    }
    expect(admit("hive-system", trap("http://anything.internal/"))).toBe("allowed");
  });

  it("refuses a callback that leaves its prefix once normalised, as the agent does", () => {
    const trap = (callback: string) => [{ path: "/etc/shadow", callback }];
    for (const url of [
      "https://alerts.example.com/teams/a/%2e%2e/%2e%2e/admin",
      "https://alerts.example.com/teams/a/%2E%2E/admin",
      "https://alerts.example.com/teams/a/../../admin",
      "https://alerts.example.com/teams/a/..%2fadmin",
      "https://alerts.example.com/teams/a/..\\admin",
      "https://user@alerts.example.com/teams/a/x",
      "https://alerts.example.com/teams/./x",
      "https://alerts.example.com/teams/a/x y",
    ]) {
      expect(admit("team-a", trap(url)), url).toContain("may name a trap callback only under");
    }
    expect(admit("team-a", trap("https://alerts.example.com/teams/a/alerts"))).toBe("allowed");
  });

  it("decides every callback as the agent's runtime check does", () => {
    const prefixes = ["https://teams.example.com/", "https://alerts.example.com/teams/"];
    const urls = [
      "https://teams.example.com/",
      "https://teams.example.com",
      "https://teams.example.com/a/b?c=d",
      "https://teams.example.com/a/.b",
      "https://teams.example.com/a/..b",
      "https://teams.example.com/a/.",
      "https://teams.example.com/a%2Fb",
      "https://teams.example.com/a%41b",
      "https://teams.example.com/a?x='y'",
      "https://teams.example.com/a?x=/../",
      "https://teams.example.com/a#frag",
      "https://teams.example.com/ü",
      "https://teams.example.com:443/a",
      "https://Teams.example.com/a",
      "https://alerts.example.com/teams",
      "https://alerts.example.com/teams/x",
      "https://alerts.example.com/teamsx",
    ];
    for (const url of urls)
      expect(admit("team-a", [{ path: "/f", callback: url }]) === "allowed", url).toBe(
        tenantCallbackAllowed(url, prefixes),
      );
  });
});

describe("the monitor's callback URL", () => {
  const URL_MARK = "https://callback-d7c1.example/hive/s3cr3t-path";
  const rendered = renderManifests({
    ...MINIMAL,
    callback: { url: URL_MARK },
    tenantCallbacks: ["https://teams.example.com/"],
    traps: [{ path: "/etc/shadow" }],
  });

  it("is in neither the DaemonSet nor any admission policy", () => {
    const exposed = rendered.filter(
      (o) =>
        (o.kind === "DaemonSet" || o.kind.startsWith("ValidatingAdmissionPolicy")) &&
        JSON.stringify(o).includes("callback-d7c1"),
    );
    expect(exposed.map((o) => `${o.kind}/${o.metadata.name}`)).toEqual([]);
  });

  it("reaches the agent from a Secret in the monitor's namespace", () => {
    const secrets = rendered.filter((o) => o.kind === "Secret");
    expect(secrets.map((o) => [o.metadata.namespace, JSON.stringify(o).includes(URL_MARK)])).toEqual([
      ["hive-system", true],
    ]);
  });
});
