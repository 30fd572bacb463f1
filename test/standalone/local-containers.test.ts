/**
 * Standalone mode's view of the local containerd, against a real containerd + runc: the
 * containers it lists, their PIDs, and a trap with `match` resolved inside each matching
 * container (never on the host).
 */
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ContainerLister, openContainerLister } from "../../runtime/standalone/local-containers.ts";
import { planWatches, trapRefs } from "../../runtime/standalone/watch-plan.ts";
import { type Containerd, containerSuiteGate, startContainerd } from "../containers/containerd-harness.ts";

const run = containerSuiteGate();

describe.runIf(run)("local containers for standalone traps", () => {
  let containerd: Containerd;
  let lister: ContainerLister;

  beforeAll(async () => {
    containerd = await startContainerd();
    await containerd.start("web-1", containerd.makeRootfs("web-1", { "etc/shadow": "web-1 secret\n" }));
    await containerd.start("db-1", containerd.makeRootfs("db-1", { "etc/shadow": "db-1 secret\n" }));
    const opened = await openContainerLister({ socket: containerd.socket });
    if (!opened) throw new Error("the test containerd's socket is missing");
    lister = opened;
  }, 60_000);

  afterAll(async () => {
    lister?.close();
    await containerd?.stop();
  });

  it("lists running containers with their namespace and a PID whose root is the container's", async () => {
    const containers = await lister.list();
    expect(containers.map((c) => c.id).sort()).toEqual(["db-1", "web-1"]);
    for (const c of containers) {
      expect(c.runtimeNamespace).toBe("default");
      expect(readFileSync(`/proc/${c.pid}/root/etc/shadow`, "utf8")).toBe(`${c.id} secret\n`);
    }
  });

  it("resolves a matching trap inside each matching container only", async () => {
    const refs = trapRefs([
      {
        file: "p.yaml",
        index: 1,
        policy: {
          apiVersion: "hive-operator.com/v1alpha1",
          kind: "HivePolicy",
          metadata: { name: "web-shadow" },
          spec: { traps: [{ path: "/etc/shadow", match: { "container-name": "web-.*" } }] },
        },
      },
    ]);
    const plan = planWatches(refs, { kernelId: "k", containers: await lister.list() });
    expect(plan.unresolved).toEqual([]);
    expect(plan.files).toHaveLength(1);
    const [file] = plan.files;
    expect(file?.target.kind === "container" && file.target.container.id).toBe("web-1");
    expect(file?.source.annotations).toMatchObject({
      container_id: "web-1",
      pod_name: "web-1",
      namespace: "default",
    });
    const pid = file?.target.kind === "container" ? file.target.container.pid : 0;
    const { statSync } = await import("node:fs");
    const st = statSync(`/proc/${pid}/root/etc/shadow`, { bigint: true });
    expect(file?.resolved.key.ino).toBe(st.ino);
    expect(statSync("/etc/shadow", { bigint: true }).ino).not.toBe(st.ino);
  });

  it("reports no lister when there is no containerd socket", async () => {
    expect(await openContainerLister({ socket: "/nonexistent/containerd.sock" })).toBeUndefined();
  });
});
