/**
 * SECURITY.md tells users what the agent can do on a node: its capabilities, host paths and
 * RBAC. Those tables are checked here against the objects the component renders, so the page
 * cannot promise less than the DaemonSet and roles grant.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { type KubernetesObject, renderManifests } from "../../component/index.ts";

const page = readFileSync(join(import.meta.dirname, "../../SECURITY.md"), "utf8");

/** The rows of the table under `### title`, as cells without backticks. */
function table(title: string): string[][] {
  const start = page.indexOf(`### ${title}\n`);
  if (start < 0) throw new Error(`SECURITY.md has no "### ${title}" section`);
  const end = page.indexOf("\n#", start + 1);
  return page
    .slice(start, end < 0 ? undefined : end)
    .split("\n")
    .filter((l) => l.startsWith("|"))
    .slice(2) // header and separator
    .map((l) =>
      l
        .split("|")
        .slice(1, -1)
        .map((c) => c.trim().replace(/`/g, "")),
    );
}

const objects = renderManifests({
  image: "hive:test",
  callback: {
    url: "https://alerts.example.com/hive",
    headersSecret: "h",
    signingSecret: { name: "s", key: "k" },
  },
});
const daemonSet = objects.find((o) => o.kind === "DaemonSet") as KubernetesObject;
const podSpec = (daemonSet.spec as { template: { spec: Record<string, unknown> } }).template.spec;
const container = (podSpec.containers as Record<string, unknown>[])[0] as {
  securityContext: { capabilities: { add: string[]; drop: string[] }; privileged: boolean };
  volumeMounts: { name: string; readOnly?: boolean }[];
};

describe("SECURITY.md", () => {
  it("lists exactly the capabilities the DaemonSet adds", () => {
    expect(container.securityContext.capabilities.drop).toEqual(["ALL"]);
    expect(container.securityContext.privileged).toBe(false);
    expect(
      table("Capabilities")
        .map((r) => r[0])
        .sort(),
    ).toEqual([...container.securityContext.capabilities.add].sort());
    const legacy = renderManifests({ image: "hive:test", legacyKernelCapabilities: true }).find(
      (o) => o.kind === "DaemonSet",
    ) as KubernetesObject;
    const added = JSON.stringify(legacy.spec).match(/"add":\[([^\]]*)\]/)?.[1] ?? "";
    expect(added).toContain('"SYS_ADMIN"');
    expect(page).toContain("`SYS_ADMIN` is added only with `legacyKernelCapabilities: true`");
  });

  it("lists every host path the agent mounts, with its access", () => {
    const volumes = podSpec.volumes as { name: string; hostPath?: { path: string } }[];
    const rendered = volumes
      .filter((v) => v.hostPath)
      .map((v) => {
        const mount = container.volumeMounts.find((m) => m.name === v.name);
        return [v.hostPath?.path, mount?.readOnly ? "read-only" : "read-write"];
      });
    const documented = table("Host paths").map(([path = "", access]) => [
      // "the spool directory (default /var/lib/hive/spool)" → its default path
      path.match(/\(default ([^)]+)\)/)?.[1] ?? path,
      access,
    ]);
    expect(documented.sort()).toEqual(rendered.sort());
  });

  it("lists exactly the RBAC rules of the agent's roles", () => {
    const rules = (kind: string) =>
      (
        objects.find((o) => o.kind === kind) as unknown as {
          rules: { apiGroups: string[]; resources: string[]; verbs: string[] }[];
        }
      ).rules.flatMap((r) =>
        r.resources.map((res) => [
          kind === "ClusterRole" ? "cluster" : "the monitor's namespace",
          r.apiGroups[0] === "" ? "core" : r.apiGroups[0],
          res,
          r.verbs.join(", "),
        ]),
      );
    const documented = table("Kubernetes API (RBAC)").map(([scope, group, resource = "", verbs]) => [
      scope,
      group,
      resource.replace(/ \(by name\)$/, ""),
      verbs,
    ]);
    expect(documented).toEqual([...rules("ClusterRole"), ...rules("Role")]);
  });
});
