/**
 * The classes the Pulumi plugin serves to other languages (component/plugin.ts), under
 * pulumi.runtime.setMocks: arguments in the schema's one-form-each shape create exactly the
 * objects that the same configuration written with TypeScript's richer forms creates.
 */
import * as pulumi from "@pulumi/pulumi";
import { describe, expect, it } from "vitest";
import {
  HiveMonitor,
  type HiveMonitorArgs,
  HivePolicy as HivePolicyResource,
} from "../../component/index.ts";
import {
  HiveMonitor as HiveMonitorComponent,
  type HiveMonitorSchemaArgs,
  HivePolicy as HivePolicyComponent,
} from "../../component/plugin.ts";
import { FULL } from "./configs.ts";
import {
  installMocks,
  kubernetesObjects,
  objectKey,
  type RecordedResource,
  resolve,
  settle,
} from "./pulumi-mocks.ts";

const recorded = installMocks();

/** The Kubernetes objects registered under `name`'s children, keyed kind/namespace/name. */
function objectsOf(name: string) {
  const mine = kubernetesObjects(recorded).filter((r) => r.name.startsWith(`${name}-`) || r.name === name);
  return Object.fromEntries(mine.map((r: RecordedResource) => [objectKey(r.inputs), r.inputs]));
}

const RICH: HiveMonitorArgs = {
  ...FULL,
  updateStrategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: 2, maxSurge: "10%" } },
  podMonitor: true,
  prometheusRule: true,
  grafanaDashboard: { namespace: "monitoring" },
  admissionPolicy: false,
};

/** FULL as a YAML or Python program writes it. */
const SCHEMA_SHAPED: HiveMonitorSchemaArgs = {
  existingNamespace: "security",
  image: FULL.image,
  imagePullPolicy: "Always",
  imagePullSecrets: ["registry-creds"],
  callback: {
    url: "https://alerts.example.com/hive",
    headersSecret: "hive-callback-headers",
    signingSecret: { name: "hive-callback-signing", key: "hmac-key" },
  },
  traps: [
    { path: "/etc/shadow", match: { matchLabels: { security: "high" } } },
    {
      path: "/etc/passwd",
      accesses: ["write", "append"],
      callback: "http://receiver.monitoring.svc:8080/alerts",
      match: { namespace: "payments", containerName: "api-.*" },
    },
    {
      policy: "canaries",
      path: "/srv/canary/credentials.json",
      create: true,
      mode: "0440",
      match: { pod: "ledger-0", ip: "10.0.3.7", containerName: "ledger|ledger-sidecar" },
    },
  ],
  nodeSelector: { "hive.example.com/monitored": "true" },
  tolerations: [{ operator: "Exists" }],
  resources: { requests: { cpu: "100m", memory: "192Mi" }, limits: { cpu: "1", memory: "1Gi" } },
  priorityClassName: "system-node-critical",
  logLevel: "debug",
  metricsPort: 9100,
  runtimeSocket: "/run/k3s/containerd/containerd.sock",
  spoolDir: "/var/lib/hive-alerts",
  containerdRoot: "/var/lib/rancher/k3s/agent/containerd",
  legacyKernelCapabilities: true,
  updateStrategy: { type: "RollingUpdate", maxUnavailable: "2", maxSurge: "10%" },
  podMonitor: {},
  prometheusRule: {},
  grafanaDashboard: { namespace: "monitoring" },
  admissionPolicy: false,
};

/** `name` replaced by `other` in the names and labels derived from the instance name. */
const renamed = (objects: object, name: string, other: string) =>
  JSON.parse(JSON.stringify(objects).replaceAll(name, other));

describe("HiveMonitor for other languages", () => {
  it("creates the same objects from schema-shaped arguments as TypeScript's forms", async () => {
    const rich = new HiveMonitor("rich", RICH);
    const shaped = new HiveMonitorComponent("shaped", SCHEMA_SHAPED);
    expect(await resolve(shaped.namespace)).toBe("security");
    expect(await resolve(shaped.policyNames)).toEqual(await resolve(rich.policyNames));
    expect(await resolve(shaped.daemonSetName)).toBe(await resolve(rich.daemonSetName));
    await settle(recorded);
    const richObjects = objectsOf("rich");
    expect(Object.keys(richObjects).length).toBeGreaterThan(5);
    expect(renamed(objectsOf("shaped"), "shaped", "rich")).toEqual(richObjects);
    expect(recorded.filter((r) => r.name === "shaped").map((r) => r.type)).toEqual([
      "hive:index:HiveMonitor",
    ]);
  });

  it("takes Outputs as the engine passes them, digits of an Output maxUnavailable becoming a number", async () => {
    const m = new HiveMonitorComponent("later", {
      image: pulumi.output("registry.example.com/hive:0.1.0"),
      callback: { url: pulumi.secret("https://alerts.example.com/hive") },
      updateStrategy: { maxUnavailable: pulumi.output("3") },
    });
    expect(await resolve(m.daemonSetName)).toBe("hive-agent");
    await settle(recorded);
    const ds = Object.values(objectsOf("later")).find((o) => o.kind === "DaemonSet");
    // The secret callback reaches the spec, which is registered as a secret as a whole.
    expect(ds.spec[pulumi.runtime.specialSigKey]).toBe(pulumi.runtime.specialSecretSig);
    expect(ds.spec.value.updateStrategy.rollingUpdate.maxUnavailable).toBe(3);
  });

  it("refuses namespace and existingNamespace together, naming the option", () => {
    expect(
      () => new HiveMonitorComponent("both", { image: "x:1", namespace: "a", existingNamespace: "b" }),
    ).toThrow(/existingNamespace.*not both/);
  });

  it("reports TypeScript's messages for schema-shaped mistakes", () => {
    const bad = () =>
      new HiveMonitorComponent("bad", {
        image: "x:1",
        logLevel: "loud",
        traps: [{ path: "etc/shadow", match: { containerName: "(" } }],
      });
    expect(bad).toThrow(/traps\[0\]\.path: must be an absolute path/);
    expect(bad).toThrow(/traps\[0\]\.match\.containerName: must be a regular expression RE2 accepts/);
    expect(bad).toThrow(/logLevel: "loud" is not one of debug, info, warn, error/);
  });
});

describe("HivePolicy for other languages", () => {
  it("holds the HivePolicy object the TypeScript resource creates, and exports its name and namespace", async () => {
    const traps = [{ path: "/app/credentials.json", accesses: ["read"], match: { containerName: "api" } }];
    const component = new HivePolicyComponent("payments", { namespace: "payments", traps });
    new HivePolicyResource("payments-ts", {
      namespace: "payments",
      name: "payments",
      traps: [{ path: "/app/credentials.json", accesses: ["read"], match: { containerName: /api/ } }],
    });
    expect(await resolve(component.policyName)).toBe("payments");
    expect(await resolve(component.namespace)).toBe("payments");
    await settle(recorded);
    const policies = recorded.filter((r) => r.type === "kubernetes:hive-operator.com/v1alpha1:HivePolicy");
    const inputs = (name: string) => policies.find((r) => r.name === name)?.inputs;
    expect(inputs("payments")).toEqual(inputs("payments-ts"));
    expect(
      recorded
        .filter((r) => r.name === "payments")
        .map((r) => r.type)
        .sort(),
    ).toEqual(["hive:index:HivePolicy", "kubernetes:hive-operator.com/v1alpha1:HivePolicy"]);
  });
});
