/**
 * HiveMonitor and HivePolicy as Pulumi programs really write them: the image from an image
 * build (an Output), the callback URL from `config.requireSecret` (a secret Output). Known
 * values are validated before anything is created, the others once resolved with the same
 * messages; the objects are those plain values give; and a secret never reaches the state in
 * plain text: under mocks, the inputs registered for every resource carry it only inside
 * Pulumi's secret wrapper.
 */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import * as pulumi from "@pulumi/pulumi";
import { beforeAll, describe, expect, it } from "vitest";
import { HiveMonitor, type HiveMonitorArgs, HivePolicy, renderManifests } from "../../component/index.ts";
import { FULL, MINIMAL } from "./configs.ts";
import {
  installMocks,
  isSecretWrapper,
  objectKey,
  plainOccurrences,
  type RecordedResource,
  resolve,
  settle,
  unwrapSecrets,
} from "./pulumi-mocks.ts";

const recorded = installMocks();
const exec = promisify(execFile);
const here = import.meta.dirname;

const SECRET_URL = "https://alerts.example.com/hive?token=s3cr3t";
const IMAGE =
  "registry.example.com/hive@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/** A value known only later, as an image build's Output is. */
function later<T>(value: T): pulumi.Output<T> {
  return pulumi.output(new Promise<T>((r) => setTimeout(() => r(value), 5))) as pulumi.Output<T>;
}

async function run(name: string, args: HiveMonitorArgs) {
  const monitor = new HiveMonitor(name, args);
  await resolve(monitor.daemonSetName);
  await resolve(monitor.policyNames);
  await settle(recorded);
  const resources = recorded.filter((r) => r.name.startsWith(`${name}-`) && r.type.startsWith("kubernetes:"));
  return { monitor, resources };
}

const byKey = (objects: unknown[]) =>
  Object.fromEntries(objects.map((o) => [objectKey(o), o as Record<string, unknown>]));

describe("HiveMonitor with an image Output and a secret callback", () => {
  let resources: RecordedResource[];
  let monitor: HiveMonitor;
  beforeAll(async () => {
    ({ monitor, resources } = await run("outputs", {
      ...FULL,
      image: later(IMAGE),
      callback: { ...(FULL.callback as object), url: pulumi.secret(SECRET_URL) },
      tenantCallbacks: ["https://alerts.example.com/teams/"],
      metricsPort: later(9100),
    }));
  });

  it("creates exactly the objects the same plain values render", () => {
    const plain = renderManifests(
      {
        ...FULL,
        image: IMAGE,
        callback: { ...(FULL.callback as object), url: SECRET_URL } as HiveMonitorArgs["callback"],
        tenantCallbacks: ["https://alerts.example.com/teams/"],
      },
      { instance: "outputs", managedBy: "pulumi" },
    );
    expect(byKey(resources.map((r) => unwrapSecrets(r.inputs)))).toEqual(byKey(plain));
  });

  it("never registers the secret URL in plain text, in any resource", () => {
    const leaks = resources.flatMap((r) =>
      plainOccurrences(r.inputs, "s3cr3t").map((path) => `${r.type} ${r.name}${path}`),
    );
    expect(leaks).toEqual([]);
    // It reaches one object, as a secret: the Secret the agents read it from.
    const secretIn = resources.filter((r) => JSON.stringify(r.inputs).includes("s3cr3t")).map((r) => r.type);
    expect(secretIn).toEqual(["kubernetes:core/v1:Secret"]);
  });

  it("keeps secret only the fields the secret reaches: names stay readable", async () => {
    const ds = resources.find((r) => r.type === "kubernetes:apps/v1:DaemonSet");
    expect(isSecretWrapper(ds?.inputs.spec)).toBe(true);
    expect(isSecretWrapper(ds?.inputs.metadata)).toBe(false);
    expect(await pulumi.isSecret(monitor.daemonSetName)).toBe(false);
    expect(await resolve(monitor.daemonSetName)).toBe("hive-agent");
    // Objects the secret does not reach are not secret at all.
    const crds = resources.filter((r) => r.type.endsWith(":CustomResourceDefinition"));
    expect(crds.map((c) => isSecretWrapper(c.inputs.spec))).toEqual([false, false]);
  });
});

describe("HiveMonitor validation with values known later", () => {
  it("rejects the known invalid options before creating anything, with the usual messages", async () => {
    const before = recorded.length;
    expect(
      () =>
        new HiveMonitor("early", {
          image: later(IMAGE),
          callback: pulumi.secret("https://alerts.example.com/hive"),
          metricsPort: 70000,
          traps: [{ path: later("/etc/shadow") }, { path: "etc/passwd" }],
        }),
    ).toThrow(
      [
        'HiveMonitor "early" has invalid options:',
        'traps[1].path: must be an absolute path (start with "/")',
        "metricsPort: 70000 must be a port number from 1 to 65535",
      ].join("\n"),
    );
    await settle(recorded);
    expect(recorded.slice(before).filter((r) => r.name.startsWith("early-"))).toEqual([]);
  });

  it("rejects an Output where the option decides which resources exist", () => {
    expect(
      () =>
        new HiveMonitor("shape", {
          ...MINIMAL,
          traps: [{ path: "/etc/shadow", policy: later("x") as unknown as string }],
        }),
    ).toThrow(
      "traps[0].policy: must be a plain value, not an Output or Promise: it decides which resources the monitor creates",
    );
  });

  it("checks a value known later with the same message once it resolves: the program fails with it", async () => {
    const failed = await exec(
      process.execPath,
      [join(here, "fixtures/run-with-mocks.ts"), join(here, "fixtures/late-invalid.ts")],
      { cwd: join(here, "../..") },
    ).then(
      () => undefined,
      (e: { code: number; stderr: string }) => e,
    );
    expect(failed?.code).not.toBe(0);
    expect(failed?.stderr).toContain(
      'HiveMonitor "late-bad" has invalid options:\nlogLevel: "trace" is not one of debug, info, warn, error',
    );
  }, 60_000);
});

describe("HiveMonitor with its namespace from an Output", () => {
  it("creates it and puts every namespaced object in it, outputting its name", async () => {
    const { monitor, resources } = await run("ns-later", {
      ...MINIMAL,
      namespace: later("security-tools"),
      traps: [{ path: "/etc/shadow" }],
    });
    expect(await resolve(monitor.namespace)).toBe("security-tools");
    const ns = resources.find((r) => r.type === "kubernetes:core/v1:Namespace");
    expect(ns?.inputs.metadata.name).toBe("security-tools");
    const namespaced = resources.filter((r) => r.inputs.metadata.namespace !== undefined);
    expect(namespaced.map((r) => r.inputs.metadata.namespace)).toEqual(
      namespaced.map(() => "security-tools"),
    );
    expect(namespaced.map((r) => r.type)).toContain("kubernetes:hive-operator.com/v1alpha1:HivePolicy");
  });
});

describe("callback shorthand", () => {
  it("takes a URL alone, a secret one included, as { url }", async () => {
    const { resources } = await run("short", {
      ...MINIMAL,
      callback: config("https://alerts.example.com/x"),
    });
    const secret = resources.find((r) => r.type === "kubernetes:core/v1:Secret");
    expect(plainOccurrences(secret?.inputs, "alerts.example.com")).toEqual([]);
    expect(unwrapSecrets(secret?.inputs.stringData)).toEqual({ url: "https://alerts.example.com/x" });
  });
});

/** What `new pulumi.Config().requireSecret(...)` returns. */
function config(value: string): pulumi.Output<string> {
  return pulumi.secret(value);
}

describe("HivePolicy with Outputs", () => {
  it("keeps a trap's secret callback secret and its name readable", async () => {
    const policy = new HivePolicy("team-secret", {
      namespace: later("payments"),
      traps: [{ path: "/app/.env", callback: config("https://hooks.example.com/team?key=abc123") }],
    });
    await resolve(policy.metadata);
    await settle(recorded);
    const r = recorded.find((x) => x.name === "team-secret");
    expect(plainOccurrences(r?.inputs, "abc123")).toEqual([]);
    expect(isSecretWrapper(r?.inputs.spec)).toBe(true);
    expect(r?.inputs.metadata).toMatchObject({ name: "team-secret", namespace: "payments" });
    expect(unwrapSecrets(r?.inputs.spec)).toEqual({
      traps: [{ path: "/app/.env", callback: "https://hooks.example.com/team?key=abc123" }],
    });
  });

  it("rejects a known bad trap before creating anything, whatever is still unknown", () => {
    expect(
      () =>
        new HivePolicy("team-bad", {
          namespace: later("payments"),
          traps: [{ path: "relative", callback: config("https://x.example.com") }],
        }),
    ).toThrow(
      'HivePolicy "team-bad" has invalid options:\ntraps[0].path: must be an absolute path (start with "/")',
    );
  });
});
