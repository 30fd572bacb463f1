import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { container, policy } from "../../test/standalone/plan-fixtures.ts";
import {
  buildWatchTable,
  containerMatches,
  counterSlots,
  planWatches,
  sourcesFor,
  trapRefs,
} from "./watch-plan.ts";

describe("host traps", () => {
  let root: string;
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), "hive-plan-"));
    mkdirSync(join(root, "etc"));
    writeFileSync(join(root, "etc/shadow"), "x");
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it("resolves a trap without match on the host root to the file's device and inode", () => {
    const refs = trapRefs([{ file: "f.yaml", index: 1, policy: policy("p", [{ path: "/etc/shadow" }]) }]);
    const plan = planWatches(refs, { kernelId: "k", hostRoot: root, nodeName: "n1" });
    expect(plan.unresolved).toEqual([]);
    expect(plan.files[0]?.resolved.key.ino).toBe(statSync(join(root, "etc/shadow"), { bigint: true }).ino);
    expect(plan.files[0]?.source.annotations).toEqual({
      hive_policy_name: "p",
      path: "/etc/shadow",
      node_name: "n1",
    });
  });

  it("gives each trap's alert source its own allow list, as a HiveData carries it in a cluster", () => {
    const allow = [{ exe: "/usr/sbin/sshd" }, { "parent-exe": "/usr/sbin/cron" }];
    const refs = trapRefs([
      {
        file: "f.yaml",
        index: 1,
        policy: policy("p", [
          { path: "/etc/shadow", allow },
          { path: "/etc/shadow", accesses: ["write"] },
        ]),
      },
    ]);
    const plan = planWatches(refs, { kernelId: "k", hostRoot: root });
    expect(plan.files.map((f) => f.source.allow)).toEqual([allow, undefined]);
    // Two traps on one file stay two sources: one trap's allowlist never silences the other.
    expect(new Set(plan.files.map((f) => f.ref.trapId)).size).toBe(2);
  });

  it("creates a missing file with create: true and the trap's mode, and reports missing ones otherwise", () => {
    const refs = trapRefs([
      {
        file: "f.yaml",
        index: 1,
        policy: policy("p", [
          { path: "/etc/new-secret", create: true, mode: "0600" },
          { path: "/etc/absent" },
        ]),
      },
    ]);
    const plan = planWatches(refs, { kernelId: "k", hostRoot: root });
    expect(plan.files.map((f) => f.ref.trap.path)).toEqual(["/etc/new-secret"]);
    expect(statSync(join(root, "etc/new-secret")).mode & 0o777).toBe(0o600);
    expect(plan.unresolved.map((u) => [u.ref.trap.path, u.error.code])).toEqual([
      ["/etc/absent", "FileNotFound"],
    ]);
  });

  it("never creates a file with a setuid or world-writable mode, reporting the trap instead", () => {
    const refs = trapRefs([
      {
        file: "f.yaml",
        index: 1,
        policy: policy("p", [
          { path: "/etc/ld.so.preload", create: true, mode: "0666" },
          { path: "/etc/su", create: true, mode: 4755 },
        ]),
      },
    ]);
    const plan = planWatches(refs, { kernelId: "k", hostRoot: root });
    expect(plan.files).toEqual([]);
    expect(plan.unresolved.map((u) => [u.ref.trap.path, u.error.code])).toEqual([
      ["/etc/ld.so.preload", "PolicyInvalid"],
      ["/etc/su", "PolicyInvalid"],
    ]);
    expect(existsSync(join(root, "etc/ld.so.preload"))).toBe(false);
    expect(existsSync(join(root, "etc/su"))).toBe(false);
  });

  it("keeps a symlink's absolute target inside the root it resolves in", () => {
    symlinkSync("/etc/shadow", join(root, "etc/link"));
    const refs = trapRefs([{ file: "f.yaml", index: 1, policy: policy("p", [{ path: "/etc/link" }]) }]);
    const plan = planWatches(refs, { kernelId: "k", hostRoot: root });
    expect(plan.files[0]?.resolved.key.ino).toBe(statSync(join(root, "etc/shadow"), { bigint: true }).ino);
  });

  it("merges traps on one file into one map entry with the union of their accesses, plus its directory", () => {
    const refs = trapRefs([
      { file: "a.yaml", index: 1, policy: policy("a", [{ path: "/etc/shadow", accesses: ["read"] }]) },
      { file: "b.yaml", index: 1, policy: policy("b", [{ path: "/etc/shadow", accesses: ["write"] }]) },
    ]);
    const plan = planWatches(refs, { kernelId: "k", hostRoot: root });
    const table = buildWatchTable(plan);
    const file = table.entries.find((e) => e.kind === "file");
    expect(file?.accesses).toEqual(["read", "write"]);
    expect(table.entries.filter((e) => e.kind === "parent")).toHaveLength(1);
    const info = table.slots.get(file?.slot ?? -1);
    expect(info && sourcesFor(info, { accesses: ["read"] }).map((f) => f.ref.policy.metadata.name)).toEqual([
      "a",
    ]);
    expect(
      info && sourcesFor(info, { accesses: ["write", "open"] }).map((f) => f.ref.policy.metadata.name),
    ).toEqual(["b"]);
  });

  it("gives the kernel a file's allow rules when one trap watches it, with the executables found at exact paths only (none through a symlink)", () => {
    mkdirSync(join(root, "usr/sbin"), { recursive: true });
    writeFileSync(join(root, "usr/sbin/sshd"), "x");
    symlinkSync("sshd", join(root, "usr/sbin/sshd-link"));
    const allow = [{ exe: "/usr/sbin/sshd" }, { exe: "/usr/sbin/sshd-link" }];
    const one = buildWatchTable(
      planWatches(
        trapRefs([{ file: "a.yaml", index: 1, policy: policy("a", [{ path: "/etc/shadow", allow }]) }]),
        {
          kernelId: "k",
          hostRoot: root,
        },
      ),
    );
    const file = one.entries.find((e) => e.kind === "file");
    expect(file?.allow).toEqual({ parent: false });
    const sshd = statSync(join(root, "usr/sbin/sshd"), { bigint: true }).ino;
    expect(one.allow.map((r) => [r.slot, r.file.ino, r.exe, r.host])).toEqual([[file?.slot, sshd, 1, true]]);
    // Two traps on one file: each judges it by its own list, in user space.
    const two = buildWatchTable(
      planWatches(
        trapRefs([
          { file: "a.yaml", index: 1, policy: policy("a", [{ path: "/etc/shadow", allow }]) },
          { file: "b.yaml", index: 1, policy: policy("b", [{ path: "/etc/shadow" }]) },
        ]),
        { kernelId: "k", hostRoot: root },
      ),
    );
    expect(two.allow).toEqual([]);
    expect(two.entries.some((e) => e.allow !== undefined)).toBe(false);
  });

  it("watches the directory of a missing file, so that its creation re-arms the trap", () => {
    const refs = trapRefs([{ file: "f.yaml", index: 1, policy: policy("p", [{ path: "/etc/later" }]) }]);
    const table = buildWatchTable(planWatches(refs, { kernelId: "k", hostRoot: root }));
    expect(table.entries).toEqual([
      expect.objectContaining({
        kind: "parent",
        key: expect.objectContaining({ ino: statSync(join(root, "etc"), { bigint: true }).ino }),
      }),
    ]);
    const [info] = table.slots.values();
    expect(info?.waiting.map((w) => w.ref.trap.path)).toEqual(["/etc/later"]);
  });

  it("keeps each file's slot across re-plans", () => {
    const slots = counterSlots();
    const refs = trapRefs([{ file: "f.yaml", index: 1, policy: policy("p", [{ path: "/etc/shadow" }]) }]);
    const first = buildWatchTable(planWatches(refs, { kernelId: "k", hostRoot: root }), slots);
    writeFileSync(join(root, "etc/other"), "y");
    const both = trapRefs([
      { file: "f.yaml", index: 1, policy: policy("p", [{ path: "/etc/other" }, { path: "/etc/shadow" }]) },
    ]);
    const second = buildWatchTable(planWatches(both, { kernelId: "k", hostRoot: root }), slots);
    const ino = statSync(join(root, "etc/shadow"), { bigint: true }).ino;
    const shadowSlot = (t: typeof first) =>
      t.entries.find((e) => e.kind === "file" && e.key.ino === ino)?.slot;
    expect(shadowSlot(second)).toBe(shadowSlot(first));
  });
});

describe("container filters", () => {
  it("apply every given filter: container-name (anchored), namespace, pod and labels", () => {
    const web = container({
      name: "x",
      labels: {
        "io.kubernetes.container.name": "web",
        "io.kubernetes.pod.name": "web-0",
        "io.kubernetes.pod.namespace": "shop",
        security: "high",
      },
    });
    expect(containerMatches({ path: "/a", match: { "container-name": "we" } }, web)).toBe(false);
    expect(containerMatches({ path: "/a", match: { "container-name": "w.b" } }, web)).toBe(true);
    expect(containerMatches({ path: "/a", match: { namespace: "shop", pod: "web-0" } }, web)).toBe(true);
    expect(containerMatches({ path: "/a", match: { namespace: "default" } }, web)).toBe(false);
    expect(containerMatches({ path: "/a", match: { matchLabels: { security: "high" } } }, web)).toBe(true);
    expect(containerMatches({ path: "/a", match: { matchLabels: { security: "low" } } }, web)).toBe(false);
    expect(containerMatches({ path: "/a", match: { ip: "10.0.0.1" } }, web)).toBe(false);
  });

  it("use containerd's namespace and container id outside Kubernetes", () => {
    const plain = container({ id: "db", name: "db", runtimeNamespace: "default" });
    expect(
      containerMatches({ path: "/a", match: { namespace: "default", "container-name": "db" } }, plain),
    ).toBe(true);
  });
});
