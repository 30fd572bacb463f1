/**
 * Kernel cases for changes of a trapped file (bpf/hive.bpf.c hive_change): a rename over it, a
 * delete, `sed -i` and a truncate are each alerted with the change named, and the trap follows
 * the file to its new identity at once — through standalone `hive watch` (the real plan, proof,
 * kernel map and alert pipeline), on the suite's watcher. Run by cases.ts in the guest.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { chmodSync, mkdirSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import type { Alert } from "../../../api/alert.ts";
import { createAlertPipeline } from "../../../runtime/alerts/pipeline.ts";
import { fileKeyFromStat, fileKeyId } from "../../../runtime/kernel/layout.ts";
import { createHiveMetrics } from "../../../runtime/metrics/metrics.ts";
import { parsePolicyText } from "../../../runtime/standalone/policy-files.ts";
import { type Standalone, startStandalone } from "../../../runtime/standalone/standalone.ts";
import { assertValidAlert, captureLogger } from "../../alerts/fixtures.ts";
import type { KernelCaseName } from "./case-names.ts";
import type { GuestHarness } from "./process-cases.ts";

type ChangeCaseName = Extract<
  KernelCaseName,
  | "changes of a trapped file are alerted with the change named, and the trap follows the file: two renames over it 100 ms apart, sed -i, a truncate, a read and a delete"
  | "a trap on a projected volume's file (the kubelet's atomic writer swaps ..data) stays armed: a read after each of three updates is alerted"
>;

/** Runs a shell script without blocking the event loop: the agent re-arms while it runs, as in production. */
async function sh(script: string): Promise<void> {
  const child = spawn("sh", ["-c", script], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const status = await new Promise<number | null>((resolve) => child.on("exit", resolve));
  if (status !== 0) throw new Error(`${script} failed: ${stderr}`);
}

/** `hive watch` on one host trap, reading `accesses` only, with its alerts collected. */
async function watchTrap(h: GuestHarness, path: string, accesses: string) {
  const alerts: Alert[] = [];
  const pipeline = await createAlertPipeline({
    logger: captureLogger().logger,
    metrics: createHiveMetrics({ processMetrics: false }),
    lines: (line) => {
      const alert = JSON.parse(line) as Alert;
      assertValidAlert(alert);
      alerts.push(alert);
    },
  });
  const files = parsePolicyText(
    "changes.yaml",
    `apiVersion: hive-operator.com/v1alpha1
kind: HivePolicy
metadata:
  name: changes
spec:
  traps:
    - path: ${path}
      accesses: [${accesses}]
`,
  );
  assert.deepEqual(files.problems, []);
  const log = captureLogger();
  const standalone = await startStandalone({
    documents: files.documents,
    watcher: h.watcher(),
    alerts: pipeline,
    logger: log.logger,
    kernelId: "00000000-0000-4000-8000-000000000021",
    nodeName: "guest",
  });
  const close = async () => {
    await standalone.close();
    await pipeline.close();
  };
  return { alerts, standalone, close, log: log.lines };
}

/** Milliseconds until the trap is armed on the file `path` names now (polled, never slept). */
async function armedWithin(standalone: Standalone, path: string, timeoutMs = 10_000): Promise<number> {
  const started = performance.now();
  const want = fileKeyId(fileKeyFromStat(statSync(path)));
  while (performance.now() - started < timeoutMs) {
    if (standalone.plan.files.some((f) => fileKeyId(f.resolved.key) === want))
      return performance.now() - started;
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error(`the trap never followed ${path} to ${want}`);
}

/** The first alert from `from` on that matches (the ring, the sweep and the pipeline are asynchronous). */
async function untilAlert(
  h: GuestHarness,
  alerts: Alert[],
  from: number,
  what: string,
  match: (a: Alert) => boolean,
): Promise<Alert> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const found = alerts.slice(from).find(match);
    if (found) return found;
    assert.ok(
      Date.now() < deadline,
      `${what}: ${JSON.stringify(
        {
          alerts: alerts.map(brief),
          changeHooks: h.watcher().changeEvents,
          seen: traced,
          health: h.watcher().health(),
          counters: h.watcher().counters(),
        },
        h.replacer,
      )}`,
    );
    await h.watcher().flush(1000);
  }
}

/** The kernel events of the running case, as the table routed them: named in a failure's message. */
const traced: unknown[] = [];
let tracing = false;
const brief = (a: Alert) => ({
  change: a.metadata.change,
  accesses: a.metadata.accesses,
  inode: a.metadata.inode,
});
const inodeOf = (path: string) => Number(statSync(path).ino);

export function changeCases(h: GuestHarness): Record<ChangeCaseName, () => Promise<Record<string, unknown>>> {
  return {
    async "changes of a trapped file are alerted with the change named, and the trap follows the file: two renames over it 100 ms apart, sed -i, a truncate, a read and a delete"() {
      const dir = join(h.dir, "changes");
      rmSync(dir, { recursive: true, force: true });
      mkdirSync(dir, { recursive: true });
      const shadow = join(dir, "shadow");
      writeFileSync(shadow, "root:*:1:0:99999:7:::\n");
      chmodSync(shadow, 0o644);
      // Reads only: a write check never reaches user space, so only the change hooks can report.
      const { alerts, standalone, close, log } = await watchTrap(h, shadow, "read");
      tracing = true;
      h.watcher().onEvent((e) => {
        if (tracing)
          traced.push({
            t: new Date().toISOString(),
            slot: e.slot,
            ino: Number(e.key.ino),
            kind: e.kind,
            mask: e.mask,
            change: e.change,
            comm: e.comm,
            table: [...standalone.table.slots.entries()].map(([slot, i]) => `${slot}:${i.kind}:${i.key.ino}`),
          });
      });
      try {
        const original = inodeOf(shadow);
        writeFileSync(join(dir, "b1"), "v1\n");
        writeFileSync(join(dir, "b2"), "v2\n");
        const first = inodeOf(join(dir, "b1"));
        // Two replacements 100 ms apart, as a script or a package manager makes them.
        await sh(`cd ${dir} && mv b1 shadow && sleep 0.1 && mv b2 shadow`);
        await armedWithin(standalone, shadow);
        const changeOf = (change: string, inode: number) => (a: Alert) =>
          a.metadata.change === change && a.metadata.inode === inode;
        await untilAlert(h, alerts, 0, "the first rename over the file", changeOf("replaced", original));
        await untilAlert(
          h,
          alerts,
          0,
          "the second rename, over the file the first put there",
          changeOf("replaced", first),
        );
        // sed reads the file and renames its edited copy over it: one burst of that thread, or two.
        let mark = alerts.length;
        const beforeSed = inodeOf(shadow);
        await sh(`sed -i s/v2/v3/ ${shadow}`);
        await armedWithin(standalone, shadow);
        await untilAlert(h, alerts, mark, "sed -i", changeOf("replaced", beforeSed));
        mark = alerts.length;
        const edited = inodeOf(shadow);
        // Opens for writing (not a kind this trap wants), then ftruncate: only the change hook sees it.
        await sh(`truncate -s 0 ${shadow}`);
        const truncated = await untilAlert(h, alerts, mark, "a truncate", changeOf("truncated", edited));
        assert.deepEqual(truncated.metadata.accesses, []);
        mark = alerts.length;
        h.run("cat", [shadow]);
        const read = await untilAlert(h, alerts, mark, "a read of the final file", (a) =>
          a.metadata.accesses.includes("read"),
        );
        assert.equal(read.metadata.inode, edited);
        assert.equal(read.metadata.change, undefined);
        mark = alerts.length;
        rmSync(shadow);
        await untilAlert(h, alerts, mark, "a delete", changeOf("deleted", edited));
        // The second rename came before user space could re-resolve: the kernel's own arming saw it.
        return { alerts: alerts.map(brief), replans: log.filter((l) => l.msg === "watching").length };
      } finally {
        tracing = false;
        await close();
        h.watcher().sync([]);
      }
    },

    async "a trap on a projected volume's file (the kubelet's atomic writer swaps ..data) stays armed: a read after each of three updates is alerted"() {
      // A ServiceAccount token volume as the kubelet writes it: the files in a timestamped
      // directory, `..data` a symlink to it, each visible name a symlink through `..data`.
      const volume = join(h.dir, "projected/var/run/secrets/kubernetes.io/serviceaccount");
      rmSync(join(h.dir, "projected"), { recursive: true, force: true });
      mkdirSync(volume, { recursive: true });
      let version = 0;
      const stamp = () => `..2026_11_26_11_00_00.${String(++version).padStart(9, "0")}`;
      const writeVersion = (): string => {
        const ts = stamp();
        mkdirSync(join(volume, ts), { mode: 0o755 });
        for (const name of ["token", "ca.crt", "namespace"]) {
          writeFileSync(join(volume, ts, name), `${name} v${version}\n`);
          chmodSync(join(volume, ts, name), 0o644);
        }
        return ts;
      };
      let current = writeVersion();
      symlinkSync(current, join(volume, "..data"));
      for (const name of ["token", "ca.crt", "namespace"])
        symlinkSync(join("..data", name), join(volume, name));
      /** One update as the atomic writer makes it: new directory, `..data` swapped by a rename, old one removed. */
      const update = () => {
        const next = writeVersion();
        symlinkSync(next, join(volume, "..data_tmp"));
        renameSync(join(volume, "..data_tmp"), join(volume, "..data"));
        rmSync(join(volume, current), { recursive: true });
        current = next;
      };
      const token = join(volume, "token");
      const { alerts, standalone, close } = await watchTrap(h, token, "read");
      const rearmMs: number[] = [];
      const reads: Alert[] = [];
      try {
        assert.equal(dirname(standalone.plan.files[0]?.resolved.resolvedPath ?? ""), join(volume, current));
        for (let i = 0; i < 3; i++) {
          const previous = inodeOf(token);
          const before = alerts.length;
          update();
          rearmMs.push(await armedWithin(standalone, token));
          // The update removed the version the trap watched: a change, named.
          await untilAlert(
            h,
            alerts,
            before,
            `update ${i + 1} removing the previous version`,
            (a) => a.metadata.change === "deleted" && a.metadata.inode === previous,
          );
          const mark = alerts.length;
          h.run("cat", [token]);
          const read = await untilAlert(h, alerts, mark, `the read after update ${i + 1}`, (a) =>
            a.metadata.accesses.includes("read"),
          );
          assert.equal(read.metadata.inode, inodeOf(token), `update ${i + 1}: the read names the new file`);
          reads.push(read);
        }
        return {
          reads: reads.length,
          rearmMs: rearmMs.map(Math.round),
          changes: alerts.filter((a) => a.metadata.change !== undefined).map(brief),
        };
      } finally {
        await close();
        h.watcher().sync([]);
      }
    },
  };
}
