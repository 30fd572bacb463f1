/**
 * `hive watch` reads the same policy files as the cluster, `allow` included: a policy file
 * with an allow list, planned on this machine, fed synthetic kernel events through a
 * stand-in watcher into the real alert pipeline.
 */
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { Alert } from "../../api/alert.ts";
import { createAlertPipeline } from "../../runtime/alerts/pipeline.ts";
import type { ExecIdentity, ExecProvenance, KernelEvent } from "../../runtime/kernel/contract.ts";
import { fileKeyFromStat } from "../../runtime/kernel/layout.ts";
import { createHiveMetrics } from "../../runtime/metrics/metrics.ts";
import { parsePolicyText } from "../../runtime/standalone/policy-files.ts";
import { startStandalone } from "../../runtime/standalone/standalone.ts";
import { captureLogger, counterValue, makeEvent } from "../alerts/fixtures.ts";
import { standInWatcher } from "./stand-in-watcher.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const exec = (exe: string): ExecIdentity => ({ exe, source: "exec" });

describe("hive watch with an allow list", () => {
  it("alerts only the accesses no entry of the trap's allow list matches", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hive-watch-allow-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const shadow = join(dir, "shadow");
    writeFileSync(shadow, "root:*:19000:0:99999:7:::\n");
    // The host's own programs, as files `hive watch` finds at the allow entries' paths.
    const bin = (name: string) => {
      const path = join(dir, name);
      writeFileSync(path, "#!/bin/true\n", { mode: 0o755 });
      return path;
    };
    const [sshd, passwd, cron] = [bin("sshd"), bin("passwd"), bin("cron")];
    const files = parsePolicyText(
      "shadow.yaml",
      `apiVersion: hive-operator.com/v1alpha1
kind: HivePolicy
metadata:
  name: shadow-watch
spec:
  traps:
    - path: ${shadow}
      allow:
        - exe: ${sshd}
        - exe: ${passwd}
          accesses: [read, write]
        - parent-exe: ${cron}
`,
    );
    expect(files.problems).toEqual([]);
    const lines: string[] = [];
    const metrics = createHiveMetrics({ processMetrics: false });
    const alerts = await createAlertPipeline({
      logger: captureLogger().logger,
      metrics,
      lines: (l) => lines.push(l),
    });
    cleanups.push(() => alerts.close());
    const kernel = standInWatcher();
    const standalone = await startStandalone({
      documents: files.documents,
      watcher: kernel.watcher,
      alerts,
      logger: captureLogger().logger,
      kernelId: "0d9f5c1e-3b7a-4c2e-9f1d-2a6b8c4e0f11",
      nodeName: "laptop",
    });
    cleanups.push(() => standalone.close());
    const entry = kernel.entries().find((e) => e.kind === "file");
    if (!entry) throw new Error("the trapped file is not in the kernel map");
    /** What the kernel records of a host program: the file at `exe` (or a stranger at that path). */
    const provenance = (exe: string): ExecProvenance => ({
      file: existsSync(exe)
        ? fileKeyFromStat(statSync(exe, { bigint: true }))
        : { major: 0, minor: 1, ino: 9n },
      layer: "other",
      loaderEnv: [],
      envUnread: false,
      traced: false,
      forkUnseen: false,
    });
    const access = (n: number, exe: string, parent: string, accesses: KernelEvent["accesses"] = ["read"]) =>
      kernel.emit(
        makeEvent(n, {
          key: entry.key,
          slot: entry.slot,
          accesses,
          process: {
            exe: exec(exe),
            provenance: provenance(exe),
            chroot: false,
            execNs: 0n,
            ppid: 1,
            parent: {
              pid: 1,
              exe: exec(parent),
              provenance: provenance(parent),
              chroot: false,
              execedSinceFork: false,
              reparented: false,
            },
          },
        }),
      );

    access(1, sshd, sshd);
    access(2, passwd, "/bin/bash", ["read", "write"]);
    access(3, "/bin/cat", cron);
    access(4, "/tmp/sshd", "/bin/bash");
    access(5, passwd, "/bin/bash", ["exec"]);
    const alerted = lines.map((l) => JSON.parse(l) as Alert);
    expect(alerted.map((a) => a.process.pid)).toEqual([4_004, 4_005]);
    expect(alerted.every((a) => a.metadata.path === shadow)).toBe(true);
    expect(await counterValue(metrics.allowedAccesses, { policy: "shadow-watch" })).toBe(3);
    expect(alerts.allowed().map((r) => [r.entry, r.count])).toEqual([
      [0, 1],
      [1, 1],
      [2, 1],
    ]);
  });
});
