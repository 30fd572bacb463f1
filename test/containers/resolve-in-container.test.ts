/**
 * Trap paths resolved in real containers (containerd + runc, started by the test): the
 * right inode in each container, a symlink to a host file never touches or reports the
 * host file, and `create: true` creates inside the container only.
 */
import { existsSync, lstatSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isHiveError } from "../../api/errors.ts";
import {
  type ContainerRuntime,
  createContainerRuntime,
  createFileResolver,
} from "../../runtime/discover/index.ts";
import { fileKeyFromStat } from "../../runtime/kernel/layout.ts";
import { type Containerd, containerSuiteGate, startContainerd } from "./containerd-harness.ts";

const enabled = containerSuiteGate();

describe.skipIf(!enabled)("trap paths in real containers", () => {
  let cd: Containerd;
  let runtime: ContainerRuntime;
  let hostDir: string;

  beforeAll(async () => {
    cd = await startContainerd();
    runtime = createContainerRuntime({ socket: cd.socket, namespaces: ["k8s.io", cd.namespace] });
    hostDir = mkdtempSync(join(tmpdir(), "hive-host-"));
  });
  afterAll(async () => {
    runtime?.close();
    await cd?.stop();
    if (hostDir) rmSync(hostDir, { recursive: true, force: true });
  });

  it("finds the PID through containerd and through the cgroup scan, and resolves each container's own file", async () => {
    const a = cd.makeRootfs("a", { "etc/shadow": "a\n" });
    const b = cd.makeRootfs("b", { "etc/shadow": "b\n" });
    await cd.start("ctr-a", a);
    await cd.start("ctr-b", b);
    const resolver = createFileResolver(runtime);
    const ra = await resolver.resolve("containerd://ctr-a", "/etc/shadow");
    const rb = await resolver.resolve("containerd://ctr-b", "/etc/shadow");
    expect(ra.key).toEqual(fileKeyFromStat(statSync(join(a, "etc/shadow"), { bigint: true })));
    expect(rb.key).toEqual(fileKeyFromStat(statSync(join(b, "etc/shadow"), { bigint: true })));
    expect(ra.key.ino).not.toBe(rb.key.ino);
    // Without the runtime socket, the /proc/*/cgroup scan finds the same process.
    const scanOnly = createContainerRuntime({});
    expect((await scanOnly.findProcess("containerd://ctr-a")).pid).toBe(ra.pid);
    // The file changes when the container replaces it by rename (what sed -i does).
    await cd.exec("ctr-a", [
      "/bin/busybox",
      "sh",
      "-c",
      "echo new > /etc/shadow.tmp && mv /etc/shadow.tmp /etc/shadow",
    ]);
    const again = await resolver.resolve("containerd://ctr-a", "/etc/shadow");
    expect(again.key.ino).not.toBe(ra.key.ino);
    expect(again.parent).toEqual(ra.parent);
  });

  it("reports a container not running as not ready", async () => {
    await expect(createFileResolver(runtime).resolve("containerd://absent", "/etc/shadow")).rejects.toSatisfy(
      (e) => isHiveError(e, "ContainerNotReady"),
    );
  });

  it("never touches or reports a host file a container symlink points to", async () => {
    const hostFile = join(hostDir, "host-secret");
    writeFileSync(hostFile, "host only\n", { mode: 0o600 });
    const before = lstatSync(hostFile, { bigint: true });
    const rootfs = cd.makeRootfs("evil");
    symlinkSync(hostFile, join(rootfs, "etc", "shadow"));
    await cd.start("ctr-evil", rootfs);
    const resolver = createFileResolver(runtime);
    const outcome = await resolver.resolve("containerd://ctr-evil", "/etc/shadow").then(
      (r) => r,
      (e: unknown) => e,
    );
    expect(isHiveError(outcome, "PathEscapesContainer")).toBe(true);
    // create: true makes the file at the symlink's target INSIDE the container.
    const made = await resolver.resolve("containerd://ctr-evil", "/etc/shadow", {
      create: true,
      mode: 0o777,
    });
    expect(made.key.ino).toBe(statSync(join(rootfs, hostFile), { bigint: true }).ino);
    expect(made.key.ino).not.toBe(before.ino);
    const after = lstatSync(hostFile, { bigint: true });
    expect(after.mode).toBe(before.mode);
    expect(after.ctimeNs).toBe(before.ctimeNs);
    expect(after.mtimeNs).toBe(before.mtimeNs);
  });

  it("holds the container's process: once the container is gone, its PID never leads to another root", async () => {
    const rootfs = cd.makeRootfs("gone", { "etc/shadow": "gone\n" });
    await cd.start("ctr-gone", rootfs);
    const files = await createFileResolver(runtime).openContainer("containerd://ctr-gone");
    try {
      expect((await files.resolve("/etc/shadow")).resolvedPath).toBe("/etc/shadow");
      await cd.remove("ctr-gone");
      const trapPath = join(hostDir, "after-exit");
      let error: unknown;
      try {
        await files.resolve(trapPath, { create: true });
      } catch (e) {
        error = e;
      }
      expect(isHiveError(error, "ContainerNotFound")).toBe(true);
      expect(existsSync(trapPath)).toBe(false);
    } finally {
      files.close();
    }
    // The runtime naming a PID of another container's process is refused as well.
    const other = cd.makeRootfs("other");
    await cd.start("ctr-other", other);
    const { pid } = await runtime.findProcess("containerd://ctr-other");
    const lying: ContainerRuntime = {
      findProcess: async () => ({ pid, source: "containerd" }),
      close: () => {},
    };
    await expect(createFileResolver(lying).openContainer("containerd://ctr-a")).rejects.toSatisfy((e) =>
      isHiveError(e, "ContainerNotFound"),
    );
  });

  it("creates a missing trap file inside the container with the requested mode, and nowhere else", async () => {
    const rootfs = cd.makeRootfs("create");
    await cd.start("ctr-create", rootfs);
    // The trap path names a directory that exists on the HOST (and not in the container).
    const trapPath = join(hostDir, "created-secret");
    const got = await createFileResolver(runtime).resolve("containerd://ctr-create", trapPath, {
      create: true,
      mode: 0o640,
    });
    const inside = statSync(join(rootfs, trapPath), { bigint: true });
    expect(got.created).toBe(true);
    expect(got.key.ino).toBe(inside.ino);
    expect(Number(inside.mode) & 0o7777).toBe(0o640);
    expect(existsSync(trapPath)).toBe(false);
    // The container itself sees the file with that mode.
    expect((await cd.exec("ctr-create", ["/bin/busybox", "stat", "-c", "%a", trapPath])).trim()).toBe("640");
  });
});
