import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { validatePolicy } from "../../api/index.ts";
import { runHive } from "./run-hive.ts";

/**
 * Validates an object against the Kubernetes OpenAPI schema of its kind with
 * kubernetes-models (offline); HivePolicies, our own kind, against api/validate.ts.
 */
async function validateObject(object: { apiVersion: string; kind: string }): Promise<void> {
  if (object.kind === "HivePolicy") {
    const result = validatePolicy(object);
    if (!result.ok) throw new Error(JSON.stringify(result.errors));
    return;
  }
  const [group, version] = object.apiVersion.includes("/")
    ? object.apiVersion.split("/")
    : [undefined, object.apiVersion];
  const module = (await import(`kubernetes-models/${group ? `${group}/` : ""}${version}`)) as Record<
    string,
    new (
      data: unknown,
    ) => { validate(): void }
  >;
  const Model = module[object.kind];
  if (Model === undefined) throw new Error(`kubernetes-models has no ${object.apiVersion} ${object.kind}`);
  new Model(object).validate();
}

const config = `# HiveMonitorArgs, as a Pulumi program would pass them
image: registry.example.com/hive:0.1.0
callback:
  url: https://alerts.example.com/hive
traps:
  - path: /etc/shadow
    match:
      matchLabels: { security: high }
  - policy: app-secrets
    path: /run/secrets/token
    create: true
    mode: 0o444
    match:
      containerName: "api-.*"
`;

describe("hive render", () => {
  it("prints the monitor's objects as YAML, each valid for its Kubernetes kind", {
    timeout: 60_000,
  }, async () => {
    const dir = mkdtempSync(join(tmpdir(), "hive-render-"));
    const file = join(dir, "hive.yaml");
    writeFileSync(file, config);
    const run = await runHive(["render", "--config", file]);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    const docs = parseAllDocuments(run.stdout);
    if (!Array.isArray(docs)) throw new Error("render printed no YAML document");
    const objects = docs.map((d) => {
      expect(d.errors).toEqual([]);
      return d.toJS() as { apiVersion: string; kind: string; metadata: { name: string } };
    });
    const kinds = objects.map((o) => o.kind);
    for (const kind of [
      "Namespace",
      "CustomResourceDefinition",
      "ServiceAccount",
      "DaemonSet",
      "HivePolicy",
    ]) {
      expect(kinds).toContain(kind);
    }
    for (const object of objects) await validateObject(object);
    const policies = objects.filter((o) => o.kind === "HivePolicy").map((o) => o.metadata.name);
    expect(policies.sort()).toEqual(["app-secrets", "default"]);
    const daemonSet = objects.find((o) => o.kind === "DaemonSet") as unknown as {
      spec: { template: { spec: { containers: { image: string }[] } } };
    };
    expect(daemonSet.spec.template.spec.containers[0]?.image).toBe("registry.example.com/hive:0.1.0");
  });

  it("reads the config from stdin and takes --image over the file's", async () => {
    const run = await runHive(["render", "--config", "-", "--image", "other.example.com/hive:2"], {
      input: config,
    });
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("image: other.example.com/hive:2");
  });

  it("names every invalid option and exits 1", async () => {
    const run = await runHive(["render", "--config", "-"], {
      input: "image: x\ntraps:\n  - path: etc/shadow\ncolour: blue\n",
    });
    expect(run.stdout).toBe("");
    expect(run.stderr).toMatch(
      /^hive render: ConfigInvalid: invalid Hive configuration \(HiveMonitorArgs\):\n/,
    );
    expect(run.stderr).toContain("\n  colour: is not a known option");
    expect(run.stderr).toContain('\n  traps[0].path: must be an absolute path (start with "/")');
    expect(run.stderr).toContain("\n  hint: fix the options named above");
    expect(run.code).toBe(1);
  });

  it("says the config file is missing with exit 5", async () => {
    const run = await runHive(["render", "--config", "no-such-hive.yaml"]);
    expect(run.stderr).toBe(
      "hive render: InputUnreadable: cannot read the config file (ENOENT) (no-such-hive.yaml); check the path\n",
    );
    expect(run.code).toBe(5);
  });
});
