import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { isHiveError } from "../../api/errors.ts";
import { bareContainerId, createContainerRuntime, findPidByCgroup } from "./container-runtime.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function procTree(entries: Record<number, string>): string {
  const proc = mkdtempSync(join(tmpdir(), "hive-proc-"));
  dirs.push(proc);
  mkdirSync(join(proc, "self"));
  for (const [pid, cgroup] of Object.entries(entries)) {
    mkdirSync(join(proc, pid));
    writeFileSync(join(proc, pid, "cgroup"), cgroup);
  }
  return proc;
}

const ID = "9d7df722223a4ad7f67f2afef5fbc0e263e23c7921011497f445e657fbced97e";

describe("container process lookup", () => {
  it("strips the runtime scheme and refuses ids that could be paths", () => {
    expect(bareContainerId(`containerd://${ID}`)).toBe(ID);
    expect(bareContainerId(ID)).toBe(ID);
    for (const bad of ["containerd://../x", "a/b", "", "containerd://"]) {
      expect(() => bareContainerId(bad)).toThrow(expect.objectContaining({ code: "ContainerNotFound" }));
    }
  });

  it("finds the container's first process from the cgroup names of kubelet and ctr layouts", () => {
    const proc = procTree({
      40: `0::/kubepods.slice/kubepods-pod1.slice/cri-containerd-${ID}.scope\n`,
      12: `0::/kubepods.slice/kubepods-pod1.slice/cri-containerd-${ID}.scope\n`,
      7: "0::/system.slice/containerd.service\n",
      9: `0::/kubepods/besteffort/pod1/${ID.slice(0, 20)}\n`, // a prefix is not the container
      30: "12:memory:/default/ctr-a\n0::/default/ctr-a\n",
    });
    expect(findPidByCgroup(ID, proc)).toBe(12);
    expect(findPidByCgroup("ctr-a", proc)).toBe(30);
    expect(findPidByCgroup(ID.slice(0, 20), proc)).toBe(9);
    expect(findPidByCgroup("nothing", proc)).toBeUndefined();
  });

  it("says not ready (retried with backoff) when no process runs the container", async () => {
    const runtime = createContainerRuntime({ procRoot: procTree({}) });
    await expect(runtime.findProcess(`containerd://${ID}`)).rejects.toSatisfy((e) =>
      isHiveError(e, "ContainerNotReady"),
    );
    // A runtime socket that does not answer falls back to the scan instead of failing.
    const proc = procTree({ 55: `0::/default/${ID}\n` });
    const withSocket = createContainerRuntime({
      socket: join(proc, "absent.sock"),
      procRoot: proc,
      timeoutMs: 500,
    });
    expect(await withSocket.findProcess(ID)).toEqual({ pid: 55, source: "cgroup" });
    withSocket.close();
  });
});
