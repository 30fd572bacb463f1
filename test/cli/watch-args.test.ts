/**
 * `hive watch` refuses what it can refuse before touching the kernel, with the documented
 * exit codes (the kernel path itself is tested under QEMU in watch.test.ts); the alert
 * pipeline options its arguments give (the spool) are checked here without a kernel.
 */
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createAlertPipeline } from "../../runtime/alerts/pipeline.ts";
import { WATCH_SPOOL_DIR, watchPipelineOptions } from "../../runtime/cli/commands/watch.ts";
import { createHiveMetrics } from "../../runtime/metrics/metrics.ts";
import { captureLogger, makeEvent, makeSource } from "../alerts/fixtures.ts";
import { startReceiver } from "../alerts/receiver.ts";
import { runHive } from "./run-hive.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe("hive watch, before the kernel", () => {
  it("needs at least one --policy", async () => {
    const run = await runHive(["watch"]);
    expect(run.stderr).toBe(
      "hive watch: watch needs at least one --policy FILE\nRun `hive watch --help` for usage.\n",
    );
    expect(run.code).toBe(2);
  });

  it("accepts only auto, kprobe.multi, fentry or kprobe as attach mode, and only http(s) callbacks", async () => {
    const attach = await runHive([
      "watch",
      "--policy",
      "examples/policies/demo-secret.yaml",
      "--attach",
      "uprobe",
    ]);
    expect(attach.stderr).toMatch(
      /^hive watch: --attach must be one of auto, kprobe\.multi, fentry, kprobe, not "uprobe"\n/,
    );
    expect(attach.code).toBe(2);
    const callback = await runHive([
      "watch",
      "--policy",
      "examples/policies/demo-secret.yaml",
      "--callback",
      "ftp://x",
    ]);
    expect(callback.stderr).toMatch(/^hive watch: --callback must be an http\(s\) URL, not "ftp:\/\/x"\n/);
    expect(callback.code).toBe(2);
  });

  it("refuses an invalid policy file with every problem, and exit 1", async () => {
    const run = await runHive(["watch", "--policy", "test/cli/fixtures/bad.yaml"]);
    expect(run.stderr.split("\n").slice(0, 2)).toEqual([
      "hive watch: PolicyInvalid: 7 problems in the policy files (test/cli/fixtures/bad.yaml):",
      '  test/cli/fixtures/bad.yaml:7: document 1 (HivePolicy "broken"): spec.traps[0].path: must be an absolute path (start with "/")',
    ]);
    expect(run.stderr).toContain(
      "\n  test/cli/fixtures/bad.yaml:21: document 2: spec.traps: must list at least one trap\n",
    );
    expect(run.stderr).toContain(
      "\n  hint: fix the fields named above (`hive validate FILE…` checks them without running anything)",
    );
    expect(run.code).toBe(1);
  });

  it("says which policy file it cannot read, with exit 5", async () => {
    const run = await runHive(["watch", "--policy", "no-such-policy.yaml"]);
    expect(run.stderr).toBe(
      "hive watch: InputUnreadable: cannot read policy file (ENOENT) (no-such-policy.yaml); check the path\n",
    );
    expect(run.code).toBe(5);
  });
});

describe("hive watch --spool", () => {
  it("spools under /var/lib/hive by default, or in the directory given, and says so in --help", async () => {
    expect(WATCH_SPOOL_DIR).toBe("/var/lib/hive/watch-spool");
    expect(watchPipelineOptions({})).toEqual({ spool: { dir: "/var/lib/hive/watch-spool" } });
    expect(watchPipelineOptions({ spool: "/srv/alerts", callback: "http://127.0.0.1:9/a" })).toEqual({
      defaultCallback: "http://127.0.0.1:9/a",
      spool: { dir: "/srv/alerts" },
    });
    const help = await runHive(["watch", "--help"]);
    expect(help.stdout).toContain("--spool DIR");
    expect(help.stdout).toMatch(/--spool DIR +durable spool .*\(default\s+\/var\/lib\/hive\/watch-spool;/s);
  });

  it("refuses an empty --spool before touching the kernel, with exit 2", async () => {
    const run = await runHive(["watch", "--policy", "examples/policies/demo-secret.yaml", "--spool", ""]);
    expect(run.stderr).toMatch(/^hive watch: --spool needs a directory\n/);
    expect(run.code).toBe(2);
  });

  it("keeps alerts the callback did not take across a restart, and delivers them after it", async () => {
    const receiver = await startReceiver();
    cleanups.push(() => receiver.close());
    await receiver.down();
    const dir = mkdtempSync(join(tmpdir(), "hive-watch-spool-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const options = watchPipelineOptions({ callback: receiver.url, spool: join(dir, "spool") });
    const start = () =>
      createAlertPipeline({
        logger: captureLogger().logger,
        metrics: createHiveMetrics({ processMetrics: false }),
        lines: false,
        delivery: { backoffBaseMs: 20, backoffMaxMs: 200 },
        ...options,
      });

    const first = await start();
    const ids = [1, 2, 3].map((n) => first.handle(makeEvent(n), makeSource("t-watch"))?.id);
    expect(await first.drain(300)).toBe(false); // the callback is down
    await first.close();
    expect(readdirSync(join(dir, "spool")).length).toBeGreaterThan(0);

    await receiver.up();
    const second = await start();
    cleanups.push(() => second.close());
    await receiver.waitForDistinct(3, 10_000);
    expect(receiver.accepted.map((r) => r.id)).toEqual(ids);
  });
});
