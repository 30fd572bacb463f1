/**
 * The tenant-scope ValidatingAdmissionPolicy as a real kube-apiserver enforces it, installed from
 * the rendered manifests: a HivePolicy outside the monitor's namespace may not name another
 * namespace in any trap's match, nor a callback outside the monitor's tenantCallbacks, and the
 * denial says why and what to do. The monitor's own callback URL appears in no policy.
 */
import { CoreV1Api, CustomObjectsApi } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GROUP, PLURAL_POLICY, VERSION } from "../../api/index.ts";
import { tenantCallbackAllowed } from "../../api/tenancy.ts";
import { TENANT_POLICY_NAME } from "../../component/builders/admission.ts";
import { type HiveMonitorArgs, renderManifests } from "../../component/index.ts";
import { policyDenial, untilEnforced } from "../cluster/admission.ts";
import { installHive } from "../cluster/install.ts";
import { type RealApi, startRealApi } from "../cluster/real-api.ts";
import { statusOf } from "../cluster/testing.ts";
import { MINIMAL } from "./configs.ts";

const ARGS: HiveMonitorArgs = {
  ...MINIMAL,
  callback: { url: "https://alerts.example.com/hive" },
  tenantCallbacks: ["https://teams.example.com", "https://alerts.example.com/teams/"],
};
const objects = renderManifests(ARGS);
const vap = objects.find(
  (o) => o.kind === "ValidatingAdmissionPolicy" && o.metadata.name === TENANT_POLICY_NAME,
);

let api: RealApi;
let custom: CustomObjectsApi;

const policy = (namespace: string, name: string, traps: unknown[], resourceVersion?: string) => ({
  apiVersion: `${GROUP}/${VERSION}`,
  kind: "HivePolicy",
  metadata: { name, namespace, ...(resourceVersion ? { resourceVersion } : {}) },
  spec: { traps },
});
const at = (namespace: string) => ({ group: GROUP, version: VERSION, namespace, plural: PLURAL_POLICY });

/**
 * What the server answers a HivePolicy holding `traps` in `namespace`, written by the admin (the
 * policy binds every user): "allowed", the tenant policy's denial message, or `<code>: <message>`.
 * CREATE is a dry-run create; UPDATE a dry-run replace of a stored policy that traps /etc/shadow.
 */
async function admit(namespace: string, traps: unknown[], operation = "CREATE"): Promise<string> {
  try {
    if (operation === "CREATE") {
      await custom.createNamespacedCustomObject({
        ...at(namespace),
        dryRun: "All",
        body: policy(namespace, "p", traps),
      });
    } else {
      const name = `stored-${namespace}`;
      const stored = (await custom.getNamespacedCustomObject({ ...at(namespace), name }).catch(() =>
        custom.createNamespacedCustomObject({
          ...at(namespace),
          body: policy(namespace, name, [{ path: "/etc/shadow" }]),
        }),
      )) as { metadata: { resourceVersion: string } };
      await custom.replaceNamespacedCustomObject({
        ...at(namespace),
        name,
        dryRun: "All",
        body: policy(namespace, name, traps, stored.metadata.resourceVersion),
      });
    }
    return "allowed";
  } catch (err) {
    const status = statusOf(err);
    const denial = policyDenial(status.message ?? "");
    if (denial?.policy === TENANT_POLICY_NAME) return denial.message;
    return `${status.code}: ${status.message}`;
  }
}

beforeAll(async () => {
  api = await startRealApi({ controllerManager: false });
  installHive(api.cp, ARGS);
  const kc = api.kubeConfig();
  custom = kc.makeApiClient(CustomObjectsApi);
  await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: "team-a" } } });
  // The policy applies once the server has loaded it.
  await untilEnforced(TENANT_POLICY_NAME, () =>
    custom.createNamespacedCustomObject({
      ...at("team-a"),
      dryRun: "All",
      body: policy("team-a", "probe", [{ path: "/etc/shadow", match: { namespace: "kube-system" } }]),
    }),
  );
});
afterAll(async () => {
  await api?.stop();
});

describe("tenant scope at admission", () => {
  it("is rendered and bound to deny", () => {
    expect(vap).toBeDefined();
    const binding = objects.find(
      (o) => o.kind === "ValidatingAdmissionPolicyBinding" && o.metadata.name === TENANT_POLICY_NAME,
    );
    expect(binding?.spec).toEqual({ policyName: TENANT_POLICY_NAME, validationActions: ["Deny"] });
  });

  it("lets a tenant trap its own namespace, and the platform namespace reach any", async () => {
    expect(await admit("team-a", [{ path: "/etc/shadow" }])).toBe("allowed");
    expect(await admit("team-a", [{ path: "/etc/shadow", match: { namespace: "team-a", pod: "web" } }])).toBe(
      "allowed",
    );
    expect(await admit("team-a", [{ path: "/etc/shadow", match: { matchLabels: { app: "x" } } }])).toBe(
      "allowed",
    );
    expect(await admit("hive-system", [{ path: "/etc/shadow", match: { namespace: "kube-system" } }])).toBe(
      "allowed",
    );
  });

  it("rejects a tenant policy that names another namespace, on create and on update, saying why", async () => {
    const traps = [{ path: "/etc/shadow" }, { path: "/etc/hostname", match: { namespace: "kube-system" } }];
    for (const operation of ["CREATE", "UPDATE"]) {
      const answer = await admit("team-a", traps, operation);
      expect(answer).toContain(
        "a HivePolicy outside hive-system traps only pods of its own namespace (team-a)",
      );
      expect(answer).toContain("remove match.namespace or set it to team-a");
    }
  });

  it("lets a tenant trap name a callback only under the monitor's tenantCallbacks", async () => {
    const trap = (callback: string) => [{ path: "/etc/shadow", callback }];
    expect(await admit("team-a", [{ path: "/etc/shadow" }])).toBe("allowed"); // to the monitor's callback
    expect(await admit("team-a", trap("https://teams.example.com/team-a"))).toBe("allowed");
    expect(await admit("team-a", trap("https://alerts.example.com/teams/a"))).toBe("allowed");
    for (const url of [
      "https://alerts.example.com/hive", // the monitor's own: a tenant leaves callback out instead
      "http://kube-dns.kube-system.svc:53/",
      "https://teams.example.com.evil.io/x", // a bare origin is a prefix up to its "/"
      "https://alerts.example.com/hive-other",
    ]) {
      expect(await admit("team-a", trap(url))).toContain("may name a trap callback only under");
    }
    expect(await admit("hive-system", trap("http://anything.internal/"))).toBe("allowed");
  });

  it("refuses a callback that leaves its prefix once normalised, as the agent does", async () => {
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
      expect(await admit("team-a", trap(url)), url).toContain("may name a trap callback only under");
    }
    expect(await admit("team-a", trap("https://alerts.example.com/teams/a/alerts"))).toBe("allowed");
  });

  it("decides every callback as the agent's runtime check does", async () => {
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
      expect((await admit("team-a", [{ path: "/f", callback: url }])) === "allowed", url).toBe(
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
