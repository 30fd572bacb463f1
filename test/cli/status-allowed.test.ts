/**
 * `hive status` shows what the allow lists let through: the alert pipeline of the agent or
 * `hive watch` writes the counts beside the watch table, status reads and renders them.
 */
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { AllowEntry } from "../../api/policy.ts";
import { allowedFileFor, readAllowedFile } from "../../runtime/alerts/allowed-counts.ts";
import { createAlertPipeline } from "../../runtime/alerts/pipeline.ts";
import { renderAllowed } from "../../runtime/cli/commands/status.ts";
import type { KernelEvent } from "../../runtime/kernel/contract.ts";
import { createHiveMetrics } from "../../runtime/metrics/metrics.ts";
import { captureLogger, imageFiles, imageProcess, makeEvent, makeSource, sleep } from "../alerts/fixtures.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** An access by the image's `exe`, child of the image's `parent`, as the kernel records it. */
const access = (n: number, exe: string, parent = "/bin/sh"): KernelEvent =>
  makeEvent(n, { process: imageProcess(exe, parent) });

const ALLOW: AllowEntry[] = [
  { exe: "/usr/sbin/sshd" },
  { "parent-exe": "/usr/sbin/cron", accesses: ["read", "open"] },
];

describe("allowed-access counts for hive status", () => {
  it("are written by the pipeline beside the watch table, read back and shown per trap and entry", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hive-allowed-"));
    dirs.push(dir);
    const file = allowedFileFor("/sys/fs/bpf/hive-standalone", dir);
    expect(file).toBe(join(dir, "hive-standalone.allowed.json"));
    const pipeline = await createAlertPipeline({
      logger: captureLogger().logger,
      metrics: createHiveMetrics({ processMetrics: false }),
      lines: false,
      rateLimit: false,
      allowedFile: file,
      allowedFlushMs: 20,
    });
    const source = makeSource("a1b2c3d4e5f6a7b8c9d0", undefined, { allow: ALLOW });
    source.allowFiles = imageFiles(["/usr/sbin/sshd", "/usr/sbin/cron"]);
    for (let i = 0; i < 3; i++) pipeline.handle(access(i, "/usr/sbin/sshd"), source);
    pipeline.handle(access(9, "/usr/bin/id", "/usr/sbin/cron"), source);
    expect(pipeline.handle(access(10, "/usr/bin/cat"), source)).toBeDefined();
    await sleep(100);
    const written = await readAllowedFile(file);
    expect(written?.pid).toBe(process.pid);
    expect(written?.records).toEqual([
      {
        policy: "shadow-watch",
        namespace: "security",
        trapId: "a1b2c3d4e5f6a7b8c9d0",
        path: "/etc/shadow",
        entry: 0,
        allow: "exe=/usr/sbin/sshd",
        count: 3,
      },
      {
        policy: "shadow-watch",
        namespace: "security",
        trapId: "a1b2c3d4e5f6a7b8c9d0",
        path: "/etc/shadow",
        entry: 1,
        allow: "parent-exe=/usr/sbin/cron accesses=read,open",
        count: 1,
      },
    ]);
    expect(pipeline.allowed()).toEqual(written?.records);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    // The last counts reach the file on close, without waiting for the interval.
    pipeline.handle(access(11, "/usr/sbin/sshd"), source);
    await pipeline.close();
    expect((await readAllowedFile(file))?.records[0]?.count).toBe(4);

    const text = renderAllowed(await readAllowedFile(file)).join("\n");
    expect(text).toMatch(/^ {2}allowed {3}5 accesses counted, not alerted, since /);
    expect(text).toContain("security/shadow-watch /etc/shadow");
    expect(text).toMatch(/4 +security\/shadow-watch \/etc\/shadow +a1b2c3d4e5f6 +#0 exe=\/usr\/sbin\/sshd/);
    expect(text).toMatch(
      /1 +security\/shadow-watch \/etc\/shadow +a1b2c3d4e5f6 +#1 parent-exe=\/usr\/sbin\/cron/,
    );
  });

  it("writes nothing while nothing was allowed, and status says so", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hive-allowed-"));
    dirs.push(dir);
    const file = allowedFileFor("/sys/fs/bpf/hive", dir);
    const pipeline = await createAlertPipeline({
      logger: captureLogger().logger,
      metrics: createHiveMetrics({ processMetrics: false }),
      lines: false,
      allowedFile: file,
      allowedFlushMs: 10,
    });
    pipeline.handle(access(1, "/usr/bin/cat"), makeSource("t", undefined, { allow: ALLOW }));
    await sleep(50);
    await pipeline.close();
    expect(await readAllowedFile(file)).toBeUndefined();
    expect(renderAllowed(undefined)).toEqual(["  allowed   (no access allowed by an allow list)"]);
  });
});
