/**
 * A lookup the kernel never answers must not stop the agent. The fault is real: a FUSE mount
 * whose daemon never replies (the /dev/fuse descriptor is held by a process that reads nothing),
 * so a lookup under it blocks in the kernel until that process exits, as on a hung FUSE or NFS
 * mount inside a container. Needs root and /dev/fuse; skipped loudly without them.
 */
import type { ChildProcess } from "node:child_process";
import {
  closeSync,
  constants,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { isHiveError } from "../../api/errors.ts";
import { hungFuseAvailable, mountHungFuse } from "../../test/fixtures/hung-fuse.ts";
import type { ContainerRuntime } from "./container-runtime.ts";
import { createFileResolver } from "./file-resolver.ts";
import { ResolvePool } from "./resolve-pool.ts";

const O_PATH = 0o10000000;
const ID = "9d7df722223a4ad7f67f2afef5fbc0e263e23c7921011497f445e657fbced97e";
const CONTAINER_CGROUP = `0::/kubepods.slice/kubepods-pod1.slice/cri-containerd-${ID}.scope\n`;

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0).reverse()) c();
});

const fuse = hungFuseAvailable();
const fuseReason = fuse.ok ? undefined : fuse.why;
if (fuseReason) console.warn(`SKIPPED hung-mount resolution tests: ${fuseReason}`);

/** A FUSE mount at `dir` that never answers (test/fixtures/hung-fuse.ts), released after each test. */
async function hungMount(dir: string, holdS: number): Promise<ChildProcess> {
  const mount = await mountHungFuse(dir, holdS);
  cleanups.push(() => mount.release());
  return mount.holder;
}

function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Whether descriptor `fd` of this process is open on `path`. */
function holds(fd: number, path: string): boolean {
  try {
    return readlinkSync(`/proc/self/fd/${fd}`) === path;
  } catch {
    return false;
  }
}

/** Counts timer ticks while `work` is pending: a blocked event loop counts none. */
async function ticksDuring<T>(
  work: () => Promise<T>,
): Promise<{ ticks: number; outcome: T | unknown; ms: number }> {
  let ticks = 0;
  const timer = setInterval(() => ticks++, 50);
  const start = performance.now();
  let outcome: T | unknown;
  try {
    outcome = await work();
  } catch (error) {
    outcome = error;
  } finally {
    clearInterval(timer);
  }
  return { ticks, outcome, ms: performance.now() - start };
}

describe.skipIf(fuseReason !== undefined)("trap resolution on a filesystem that never answers", () => {
  it("keeps the event loop running while a container's lookup hangs, and ends with the timeout error", async () => {
    const proc = tempDir("hive-proc-");
    const root = join(proc, "42", "root");
    mkdirSync(join(root, "mnt"), { recursive: true });
    writeFileSync(join(proc, "42", "cgroup"), CONTAINER_CGROUP);
    await hungMount(join(root, "mnt"), 4);
    const runtime: ContainerRuntime = {
      findProcess: async () => ({ pid: 42, source: "containerd" }),
      close: () => {},
    };
    const resolver = createFileResolver(runtime, proc, { timeoutMs: 1000 });
    const { ticks, outcome, ms } = await ticksDuring(() =>
      resolver.resolve(`containerd://${ID}`, "/mnt/secret"),
    );
    expect(isHiveError(outcome, "PathInvalid")).toBe(true);
    expect((outcome as Error).message).toMatch(/took longer than 1000 ms/);
    expect(ms).toBeLessThan(3000);
    expect(ticks).toBeGreaterThanOrEqual(10);
    await resolver.close?.();
  });

  it("resolves other traps with a fresh thread while one is stuck, and lets go of the stuck one when its syscall ends", async () => {
    const base = tempDir("hive-root-");
    mkdirSync(join(base, "mnt"));
    mkdirSync(join(base, "etc"));
    writeFileSync(join(base, "etc", "shadow"), "x");
    const holder = await hungMount(join(base, "mnt"), 60);
    const pool = new ResolvePool({ timeoutMs: 500, maxWorkers: 1, maxStuck: 2 });
    cleanups.push(() => void pool.close());
    const fdsBefore = readdirSync("/proc/self/fd").length;
    const hung = pool.resolve(openSync(base, O_PATH | constants.O_DIRECTORY), "/mnt/secret");
    // Queued behind the hung one on the single thread: runs on a fresh thread once that one is abandoned.
    const fine = pool.resolve(openSync(base, O_PATH | constants.O_DIRECTORY), "/etc/shadow");
    await expect(hung).rejects.toSatisfy(
      (e) =>
        isHiveError(e, "PathInvalid") && (e as { details: { timedOut?: boolean } }).details.timedOut === true,
    );
    expect((await fine).resolvedPath).toBe("/etc/shadow");
    expect(pool.stats()).toMatchObject({ stuck: 1, timeouts: 1 });
    // A second stuck lookup reaches the bound: the next resolution is refused at once.
    await expect(pool.resolve(openSync(base, O_PATH | constants.O_DIRECTORY), "/mnt/other")).rejects.toThrow(
      /longer than 500 ms/,
    );
    await expect(pool.resolve(openSync(base, O_PATH | constants.O_DIRECTORY), "/etc/shadow")).rejects.toThrow(
      /2 path resolutions are stuck/,
    );
    // The mount's daemon goes away: the lookups fail (ENOTCONN), the threads exit, their root descriptors are closed.
    holder.kill("SIGKILL");
    const deadline = Date.now() + 5000;
    while (pool.stats().stuck > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(pool.stats().stuck).toBe(0);
    expect(
      (await pool.resolve(openSync(base, O_PATH | constants.O_DIRECTORY), "/etc/shadow")).resolvedPath,
    ).toBe("/etc/shadow");
    // The worker's own descriptors leak when it is terminated mid-walk (at most two per abandoned walk).
    expect(readdirSync("/proc/self/fd").length - fdsBefore).toBeLessThanOrEqual(4 + 2);
  });
  it("does not walk again a path whose last walk is still stuck: no retry strands another thread", async () => {
    const base = tempDir("hive-root-");
    mkdirSync(join(base, "mnt"));
    mkdirSync(join(base, "etc"));
    writeFileSync(join(base, "etc", "shadow"), "x");
    const holder = await hungMount(join(base, "mnt"), 60);
    const pool = new ResolvePool({ timeoutMs: 500, maxStuck: 2 });
    cleanups.push(() => void pool.close());
    const root = () => openSync(base, O_PATH | constants.O_DIRECTORY);
    await expect(pool.resolveAll(root(), [{ path: "/mnt/secret" }], "c1")[0]).rejects.toThrow(
      /longer than 500 ms/,
    );
    // The discover loop retries it, again and again: each answer comes at once, and no thread is added.
    for (let i = 0; i < 4; i++) {
      const error = await pool.resolveAll(root(), [{ path: "/mnt/secret" }], "c1")[0]?.catch((e) => e);
      expect(error.message).toMatch(/still stuck/);
      expect(error.details).toMatchObject({ timedOut: true });
    }
    expect(pool.stats()).toMatchObject({ stuck: 1, timeouts: 1 });
    // Other paths, and the same path in another container, are walked as usual.
    expect((await pool.resolveAll(root(), [{ path: "/etc/shadow" }], "c1")[0])?.resolvedPath).toBe(
      "/etc/shadow",
    );
    await expect(pool.resolveAll(root(), [{ path: "/mnt/secret" }], "c2")[0]).rejects.toThrow(
      /longer than 500 ms/,
    );
    // At the bound, a refusal says it is not the path's fault (discover keeps what the trap had).
    const refused = await pool.resolve(root(), "/etc/shadow").catch((e) => e);
    expect(refused.message).toMatch(/2 path resolutions are stuck/);
    expect(refused.details).toMatchObject({ refused: true });
    holder.kill("SIGKILL");
    const deadline = Date.now() + 5000;
    while (pool.stats().stuck > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    // Once the lookup returns, the path is walked again (and now fails as the dead mount makes it).
    const after = await pool.resolveAll(root(), [{ path: "/mnt/secret" }], "c1")[0]?.catch((e) => e);
    expect(after.message).not.toMatch(/still stuck/);
  });

  it("delivers the walks of a batch done before one that hangs, times that one out, and resolves the rest on a fresh thread", async () => {
    const base = tempDir("hive-root-");
    mkdirSync(join(base, "mnt"));
    mkdirSync(join(base, "etc"));
    for (const f of ["a", "b", "c", "d"]) writeFileSync(join(base, "etc", f), f);
    const holder = await hungMount(join(base, "mnt"), 60);
    const pool = new ResolvePool({ timeoutMs: 1000, maxWorkers: 1, maxStuck: 4 });
    cleanups.push(() => void pool.close());
    await pool.resolve(openSync(base, O_PATH | constants.O_DIRECTORY), "/etc/a"); // the thread has started
    const rootFd = openSync(base, O_PATH | constants.O_DIRECTORY);
    const start = performance.now();
    const settledAt: Record<string, number> = {};
    const { ticks, outcome } = await ticksDuring(() =>
      Promise.allSettled(
        pool
          .resolveAll(rootFd, [
            { path: "/etc/a" },
            { path: "/etc/b" },
            { path: "/mnt/secret" },
            { path: "/etc/c" },
            { path: "/etc/missing" },
            { path: "/etc/d" },
          ])
          .map((p, i) =>
            p.finally(() => {
              settledAt[i] = performance.now() - start;
            }),
          ),
      ),
    );
    const results = outcome as PromiseSettledResult<{ resolvedPath: string }>[];
    expect(results.map((r) => (r.status === "fulfilled" ? r.value.resolvedPath : "rejected"))).toEqual([
      "/etc/a",
      "/etc/b",
      "rejected",
      "/etc/c",
      "rejected",
      "/etc/d",
    ]);
    // Those before the hung walk arrive at once, not at its deadline.
    expect(settledAt[2]).toBeGreaterThanOrEqual(1000);
    expect(settledAt[0]).toBeLessThan((settledAt[2] ?? 0) - 600);
    expect(settledAt[1]).toBeLessThan((settledAt[2] ?? 0) - 600);
    const hung = (results[2] as PromiseRejectedResult).reason;
    expect(isHiveError(hung, "PathInvalid") && hung.details.timedOut === true).toBe(true);
    expect(isHiveError((results[4] as PromiseRejectedResult).reason, "FileNotFound")).toBe(true);
    expect(ticks).toBeGreaterThanOrEqual(10); // the event loop ran throughout
    expect(pool.stats()).toEqual({ stuck: 1, timeouts: 1, batches: 3 });
    // The root stays open for the abandoned thread, and is closed once it has exited.
    expect(holds(rootFd, base)).toBe(true);
    holder.kill("SIGKILL");
    const deadline = Date.now() + 5000;
    while (pool.stats().stuck > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(pool.stats().stuck).toBe(0);
    expect(holds(rootFd, base)).toBe(false);
  });

  it("refuses the rest of a batch once its hung walks reach the bound of stuck threads", async () => {
    const base = tempDir("hive-root-");
    mkdirSync(join(base, "mnt"));
    mkdirSync(join(base, "etc"));
    writeFileSync(join(base, "etc", "shadow"), "x");
    await hungMount(join(base, "mnt"), 60);
    const pool = new ResolvePool({ timeoutMs: 300, maxWorkers: 2, maxStuck: 2 });
    cleanups.push(() => void pool.close());
    const results = await Promise.allSettled(
      pool.resolveAll(openSync(base, O_PATH | constants.O_DIRECTORY), [
        { path: "/mnt/one" },
        { path: "/mnt/two" },
        { path: "/mnt/three" },
        { path: "/etc/shadow" },
      ]),
    );
    const reasons = results.map((r) => (r.status === "rejected" ? (r.reason as Error).message : "resolved"));
    expect(reasons[0]).toMatch(/longer than 300 ms/);
    expect(reasons[1]).toMatch(/longer than 300 ms/);
    expect(reasons[2]).toMatch(/2 path resolutions are stuck/);
    expect(reasons[3]).toMatch(/2 path resolutions are stuck/);
    expect(pool.stats()).toMatchObject({ stuck: 2, timeouts: 2 });
  });
});

describe("trap resolution off the event loop", () => {
  it("walks a 40-symlink maze 2,000 directories deep with a handful of descriptors open at any time", async () => {
    const base = tempDir("hive-maze-");
    const deep = Array(2000).fill("d").join("/");
    mkdirSync(join(base, deep), { recursive: true });
    writeFileSync(join(base, deep, "secret"), "x");
    for (let i = 1; i <= 40; i++) {
      symlinkSync(i === 40 ? `/${deep}/secret` : `/${deep}/l${i + 1}`, join(base, deep, `l${i}`));
    }
    const pool = new ResolvePool({ timeoutMs: 10_000 });
    cleanups.push(() => void pool.close());
    await pool.resolve(openSync(base, O_PATH | constants.O_DIRECTORY), "/etc/none").catch(() => undefined); // thread started
    const before = readdirSync("/proc/self/fd").length;
    let peak = before;
    const sample = setInterval(() => {
      peak = Math.max(peak, readdirSync("/proc/self/fd").length);
    }, 1);
    const { outcome } = await ticksDuring(() =>
      pool.resolve(openSync(base, O_PATH | constants.O_DIRECTORY), `/${deep}/l1`),
    );
    clearInterval(sample);
    expect(isHiveError(outcome, "PathInvalid")).toBe(true);
    expect((outcome as Error).message).toMatch(/more than 4096 path components/);
    expect(peak - before).toBeLessThanOrEqual(4);
    expect(readdirSync("/proc/self/fd").length).toBe(before);
    closeSync(openSync(base, "r")); // the directory is still usable: nothing was exhausted
  });
  it("answers each walk of a batch under one root, in order, in one trip to a thread", async () => {
    const base = tempDir("hive-batch-");
    mkdirSync(join(base, "etc"));
    for (let i = 0; i < 20; i++) writeFileSync(join(base, "etc", `trap-${i}`), "x");
    symlinkSync("/../../etc/trap-3", join(base, "etc", "escape"));
    const pool = new ResolvePool();
    cleanups.push(() => void pool.close());
    const rootFd = openSync(base, O_PATH | constants.O_DIRECTORY);
    const walks = [
      ...Array.from({ length: 20 }, (_, i) => ({ path: `/etc/trap-${i}` })),
      { path: "/etc/none" },
      { path: "/etc/escape" },
      { path: "/etc/created", options: { create: true, mode: 0o400 } },
    ];
    const results = await Promise.allSettled(pool.resolveAll(rootFd, walks));
    expect(
      results.slice(0, 20).map((r) => (r.status === "fulfilled" ? r.value.resolvedPath : "rejected")),
    ).toEqual(walks.slice(0, 20).map((w) => w.path));
    expect(isHiveError((results[20] as PromiseRejectedResult).reason, "FileNotFound")).toBe(true);
    // A symlink climbing out of the root stays inside it: /../../etc/trap-3 is the root's /etc/trap-3.
    expect(results[21]?.status === "fulfilled" && results[21].value.resolvedPath).toBe("/etc/trap-3");
    expect(results[22]?.status === "fulfilled" && results[22].value.created).toBe(true);
    expect(pool.stats()).toEqual({ stuck: 0, timeouts: 0, batches: 1 });
    expect(holds(rootFd, base)).toBe(false); // the root was closed
    const unused = openSync(base, O_PATH | constants.O_DIRECTORY);
    expect(pool.resolveAll(unused, [])).toEqual([]);
    expect(holds(unused, base)).toBe(false);
  });

  it("keeps a thread for the next batch, and stops it once idle for idleMs: an idle node holds no resolver isolate", async () => {
    const base = tempDir("hive-idle-");
    mkdirSync(join(base, "etc"));
    writeFileSync(join(base, "etc", "shadow"), "x");
    const pool = new ResolvePool({ idleMs: 300 });
    cleanups.push(() => void pool.close());
    const walk = () => pool.resolve(openSync(base, O_PATH | constants.O_DIRECTORY), "/etc/shadow");
    await walk();
    expect([pool.idleThreads, pool.threadsStarted]).toEqual([1, 1]);
    await walk(); // taken again within idleMs: no new thread
    expect([pool.idleThreads, pool.threadsStarted]).toEqual([1, 1]);
    await new Promise((r) => setTimeout(r, 1000));
    expect(pool.idleThreads).toBe(0);
    expect((await walk()).resolvedPath).toBe("/etc/shadow"); // a fresh thread when needed again
    expect(pool.threadsStarted).toBe(2);
  });

  it("refuses to arm a trap it is asked to prove while no kernel program is pinned: TrapNotProven, pending", async () => {
    const base = tempDir("hive-unproven-");
    writeFileSync(join(base, "secret"), "x");
    const pool = new ResolvePool({ proofPinRoot: join(base, "no-pins") });
    cleanups.push(() => void pool.close());
    const error = await pool
      .resolve(openSync(base, O_PATH | constants.O_DIRECTORY), "/secret")
      .catch((e) => e);
    expect(isHiveError(error, "TrapNotProven")).toBe(true);
    expect(error.details).toMatchObject({ pending: true });
  });
});
