/**
 * PID reuse between the runtime's answer and the use of the PID: the container's process is
 * held by its /proc directory and its cgroup checked through it, so a PID that now names a host
 * process never leads the resolver to the host root. Faults are real: a fake /proc tree whose
 * entry is replaced under a held descriptor, and a real host process behind the PID.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { isHiveError } from "../../api/errors.ts";
import type { ContainerRuntime } from "./container-runtime.ts";
import { createFileResolver } from "./file-resolver.ts";

const ID = "9d7df722223a4ad7f67f2afef5fbc0e263e23c7921011497f445e657fbced97e";
const CONTAINER_CGROUP = `0::/kubepods.slice/kubepods-pod1.slice/cri-containerd-${ID}.scope\n`;
const HOST_CGROUP = "0::/system.slice/sshd.service\n";

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0).reverse()) c();
});

function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A runtime that names `pid` for every container, as containerd would have a moment ago. */
const runtimeNaming = (pid: number): ContainerRuntime => ({
  findProcess: async () => ({ pid, source: "containerd" }),
  close: () => {},
});

/** `<proc>/<pid>` with a cgroup file and a root holding `files`. */
function procEntry(proc: string, pid: number, cgroup: string, files: Record<string, string>): string {
  const root = join(proc, String(pid), "root");
  mkdirSync(root, { recursive: true });
  writeFileSync(join(proc, String(pid), "cgroup"), cgroup);
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(join(root, path, ".."), { recursive: true });
    writeFileSync(join(root, path), content);
  }
  return root;
}

const failure = async (fn: () => Promise<unknown>) => {
  try {
    await fn();
  } catch (error) {
    return error;
  }
  return undefined;
};

describe("file resolver and PID reuse", () => {
  it("resolves in the root of the process the runtime named while it is the container's", async () => {
    const proc = tempDir("hive-proc-");
    procEntry(proc, 42, CONTAINER_CGROUP, { "etc/shadow": "container\n" });
    const got = await createFileResolver(runtimeNaming(42), proc).resolve(
      `containerd://${ID}`,
      "/etc/shadow",
    );
    expect(got.pid).toBe(42);
    expect(got.resolvedPath).toBe("/etc/shadow");
  });

  it("refuses a PID that already names a host process, and creates nothing in the host root", async () => {
    const proc = tempDir("hive-proc-");
    const hostRoot = procEntry(proc, 42, HOST_CGROUP, { "etc/shadow": "host\n" });
    const resolver = createFileResolver(runtimeNaming(42), proc);
    await expect(resolver.openContainer(`containerd://${ID}`)).rejects.toSatisfy(
      (e) => isHiveError(e, "ContainerNotFound") && /not the container's/.test((e as Error).message),
    );
    await expect(resolver.resolve(`containerd://${ID}`, "/etc/created", { create: true })).rejects.toSatisfy(
      (e) => isHiveError(e, "ContainerNotFound"),
    );
    expect(existsSync(join(hostRoot, "etc/created"))).toBe(false);
  });

  it("never follows the PID to a host process that took it after the container's process was opened", async () => {
    const proc = tempDir("hive-proc-");
    const containerRoot = procEntry(proc, 42, CONTAINER_CGROUP, { "etc/shadow": "container\n" });
    const files = await createFileResolver(runtimeNaming(42), proc).openContainer(`containerd://${ID}`);
    cleanups.push(() => files.close());
    // The container exits (its /proc entry goes) and a host process is given PID 42.
    renameSync(join(proc, "42"), join(proc, "exited"));
    rmSync(join(proc, "exited"), { recursive: true });
    const hostRoot = procEntry(proc, 42, HOST_CGROUP, { "etc/shadow": "host\n" });
    const error = await failure(() => files.resolve("/etc/created", { create: true }));
    expect(isHiveError(error, "ContainerNotFound")).toBe(true);
    expect(await failure(() => files.resolve("/etc/shadow"))).toSatisfy((e) =>
      isHiveError(e, "ContainerNotFound"),
    );
    expect(existsSync(join(hostRoot, "etc/created"))).toBe(false);
    expect(existsSync(join(containerRoot, "etc/created"))).toBe(false);
  });

  it("keeps resolving in the container it opened while a new process under the same PID number appears", async () => {
    const proc = tempDir("hive-proc-");
    procEntry(proc, 42, CONTAINER_CGROUP, { "etc/shadow": "container\n" });
    const files = await createFileResolver(runtimeNaming(42), proc).openContainer(`containerd://${ID}`);
    cleanups.push(() => files.close());
    // The held directory moves away (still the same process); PID 42 in the tree is now a host process.
    renameSync(join(proc, "42"), join(proc, "held"));
    const hostRoot = procEntry(proc, 42, HOST_CGROUP, {});
    const made = await files.resolve("/etc/created", { create: true });
    expect(made.created).toBe(true);
    expect(existsSync(join(proc, "held", "root", "etc/created"))).toBe(true);
    expect(existsSync(join(hostRoot, "etc/created"))).toBe(false);
  });

  it("refuses a real host process behind the PID: its root is the host's and a created file would land there", async () => {
    const hostDir = tempDir("hive-host-");
    const child: ChildProcess = spawn("sleep", ["30"], { stdio: "ignore" });
    cleanups.push(() => child.kill("SIGKILL"));
    await new Promise((resolve) => child.once("spawn", resolve));
    const resolver = createFileResolver(runtimeNaming(child.pid as number));
    const trapPath = join(hostDir, "created-secret");
    await expect(resolver.resolve(`containerd://${ID}`, trapPath, { create: true })).rejects.toSatisfy((e) =>
      isHiveError(e, "ContainerNotFound"),
    );
    expect(existsSync(trapPath)).toBe(false);
  });

  it("reports a process that exited between lookup and open as ContainerNotFound", async () => {
    const child = spawn("true", [], { stdio: "ignore" });
    await new Promise((resolve) => child.once("exit", resolve));
    const resolver = createFileResolver(runtimeNaming(child.pid as number));
    await expect(resolver.resolve(`containerd://${ID}`, "/etc/shadow")).rejects.toSatisfy((e) =>
      isHiveError(e, "ContainerNotFound"),
    );
  });

  it("resolves all traps of a container in one batch, each with its own outcome, and none once the PID is a host process's", async () => {
    const proc = tempDir("hive-proc-");
    procEntry(proc, 42, CONTAINER_CGROUP, { "etc/shadow": "container\n", "etc/passwd": "container\n" });
    const resolver = createFileResolver(runtimeNaming(42), proc);
    cleanups.push(() => void resolver.close?.());
    const files = await resolver.openContainer(`containerd://${ID}`);
    cleanups.push(() => files.close());
    const outcomes = await files.resolveAll([
      { path: "/etc/shadow" },
      { path: "/etc/missing" },
      { path: "/etc/passwd" },
    ]);
    expect(outcomes.map((o) => (o.ok ? o.file.resolvedPath : isHiveError(o.error, "FileNotFound")))).toEqual([
      "/etc/shadow",
      true,
      "/etc/passwd",
    ]);
    // The container exits and a host process is given its PID: every walk is refused, nothing is created.
    renameSync(join(proc, "42"), join(proc, "exited"));
    rmSync(join(proc, "exited"), { recursive: true });
    const hostRoot = procEntry(proc, 42, HOST_CGROUP, { "etc/shadow": "host\n" });
    const refused = await files.resolveAll([
      { path: "/etc/shadow" },
      { path: "/etc/created", options: { create: true } },
    ]);
    expect(refused.map((o) => !o.ok && isHiveError(o.error, "ContainerNotFound"))).toEqual([true, true]);
    expect(existsSync(join(hostRoot, "etc/created"))).toBe(false);
  });
});
