/**
 * The host's own kernel cannot attach kprobes here, but its verifier must accept the
 * program: load it (CO-RE relocated, read-only data set from this kernel's BTF) without
 * attaching. Needs root (CAP_BPF); without it the suite says so, and fails under CI.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { isHiveError } from "../../runtime/errors.ts";
import { inodePermissionSignature } from "../../runtime/kernel/kernel-btf.ts";
import { openKernelWatcher } from "../../runtime/kernel/loader.ts";

const isRoot = process.getuid?.() === 0;
if (!isRoot) {
  console.warn(
    "!!! test/kernel/verifier.test.ts: not root, cannot load BPF programs — SKIPPED (fails under CI=true)",
  );
}
const runIt = isRoot || process.env.CI === "true" ? it : it.skip;

const hasKprobes =
  existsSync("/sys/bus/event_source/devices/kprobe") || existsSync("/sys/kernel/tracing/kprobe_events");

describe("the trap program on the host kernel", () => {
  runIt("reads inode_permission's signature from the kernel's BTF", () => {
    const sig = inodePermissionSignature();
    expect(sig.params[sig.inodeArg]).toBe("inode");
    expect(sig.params.length).toBe(sig.inodeArg + 2);
  });

  runIt("passes the verifier in kprobe mode (load without attach)", async () => {
    const watcher = openKernelWatcher({ attach: false, pinRoot: null });
    expect(watcher.programFd).toBeGreaterThan(0);
    watcher.sync([{ key: { major: 8, minor: 1, ino: 4242n }, slot: 1, accesses: ["read"], kind: "file" }]);
    expect(watcher.counters()).toMatchObject({ watched: 1, events: 0n, lost: 0n });
    watcher.sync([]);
    expect(watcher.counters().watched).toBe(0);
    await watcher.close();
  });

  runIt("loads in fentry mode or reports FentryUnsupported with a hint", async () => {
    try {
      const watcher = openKernelWatcher({ attach: false, pinRoot: null, attachMode: "fentry" });
      expect(watcher.programFd).toBeGreaterThan(0);
      await watcher.close();
    } catch (error) {
      expect(isHiveError(error, "FentryUnsupported")).toBe(true);
      expect((error as { hint?: string }).hint).toMatch(/kprobe/);
    }
  });

  runIt(
    "attaching reports KprobeUnsupported with the fentry hint where the kernel has no kprobes",
    async () => {
      if (hasKprobes) {
        const watcher = openKernelWatcher({ pinRoot: null });
        expect(watcher.attachMode).toBe("kprobe");
        await watcher.close();
        return;
      }
      expect(() => openKernelWatcher({ pinRoot: null })).toThrowError(
        expect.objectContaining({ code: "KprobeUnsupported", hint: expect.stringMatching(/fentry/) }),
      );
    },
  );

  runIt("refuses to pin outside a BPF filesystem", () => {
    const dir = mkdtempSync(join(tmpdir(), "hive-pins-"));
    try {
      expect(() => openKernelWatcher({ attach: false, pinRoot: join(dir, "hive") })).toThrowError(
        expect.objectContaining({ code: "BpffsMissing", hint: expect.stringMatching(/mount -t bpf/) }),
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
