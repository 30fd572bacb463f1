/**
 * `hive watch` and changes of a trapped file: the change is alerted with its name, and the trap
 * follows the path at once, never dropping a re-plan asked for while one runs, and trying a failed
 * one again. A stand-in watcher raises the events a kernel would (test/kernel covers the kernel).
 */
import { mkdtempSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { Alert } from "../../api/alert.ts";
import { createAlertPipeline } from "../../runtime/alerts/pipeline.ts";
import { fileKeyFromStat, fileKeyId } from "../../runtime/kernel/layout.ts";
import { createHiveMetrics } from "../../runtime/metrics/metrics.ts";
import { parsePolicyText } from "../../runtime/standalone/policy-files.ts";
import { startStandalone } from "../../runtime/standalone/standalone.ts";
import { captureLogger, makeEvent } from "../alerts/fixtures.ts";
import { standInWatcher } from "./stand-in-watcher.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function until(what: string, done: () => boolean): Promise<void> {
  const deadline = Date.now() + 5000;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`${what} never happened`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

async function watchShadow(listContainers?: () => Promise<[]>) {
  const dir = mkdtempSync(join(tmpdir(), "hive-watch-changes-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const shadow = join(dir, "shadow");
  writeFileSync(shadow, "v0\n");
  const files = parsePolicyText(
    "shadow.yaml",
    `apiVersion: hive-operator.com/v1alpha1
kind: HivePolicy
metadata:
  name: shadow
spec:
  traps:
    - path: ${shadow}
      accesses: [read]
    - path: ${shadow}
      changes: false
`,
  );
  expect(files.problems).toEqual([]);
  const alerts: Alert[] = [];
  const pipeline = await createAlertPipeline({
    logger: captureLogger().logger,
    metrics: createHiveMetrics({ processMetrics: false }),
    lines: (l) => alerts.push(JSON.parse(l) as Alert),
  });
  cleanups.push(() => pipeline.close());
  const kernel = standInWatcher();
  const standalone = await startStandalone({
    documents: files.documents,
    watcher: kernel.watcher,
    alerts: pipeline,
    logger: captureLogger().logger,
    kernelId: "0d9f5c1e-3b7a-4c2e-9f1d-2a6b8c4e0f11",
    nodeName: "laptop",
    replanRetryMs: 5,
    ...(listContainers ? { listContainers } : {}),
  });
  cleanups.push(() => standalone.close());
  const file = () => kernel.entries().find((e) => e.kind === "file");
  /** Replaces the file as `mv new shadow` does; returns its new identity. */
  const replace = (n: number) => {
    writeFileSync(join(dir, "new"), `v${n}\n`);
    renameSync(join(dir, "new"), shadow);
    return fileKeyId(fileKeyFromStat(statSync(shadow)));
  };
  return { kernel, alerts, file, replace };
}

describe("hive watch and changes of a trapped file", () => {
  it("alerts a change to the traps that report changes, whatever their accesses, and follows the file at once", async () => {
    const { kernel, alerts, file, replace } = await watchShadow();
    const before = file();
    if (!before) throw new Error("the trapped file is not watched");
    expect(before.changes).toBe(true);
    const next = replace(1);
    kernel.emit(
      makeEvent(1, { key: before.key, slot: before.slot, accesses: [], mask: 0, change: "replaced" }),
    );
    await until("the alert", () => alerts.length > 0);
    // One alert: the trap with `changes: false` and the read-only trap share the file; only the second reports it.
    expect(alerts.map((a) => [a.metadata.change, a.metadata.accesses])).toEqual([["replaced", []]]);
    await until("re-armed on the new file", () => fileKeyId(file()?.key ?? before.key) === next);
  });

  it("never drops a re-plan: changes during one are followed by another, which arms the last file", async () => {
    const { kernel, file, replace } = await watchShadow();
    const first = file();
    if (!first) throw new Error("the trapped file is not watched");
    // Two replacements in a row, the second while the re-plan for the first may be under way.
    replace(1);
    kernel.emit(
      makeEvent(1, { key: first.key, slot: first.slot, accesses: [], mask: 0, change: "replaced" }),
    );
    const last = replace(2);
    kernel.emit(
      makeEvent(2, { key: first.key, slot: first.slot, accesses: [], mask: 0, change: "replaced" }),
    );
    await until("armed on the last file", () => fileKeyId(file()?.key ?? first.key) === last);
  });

  it("tries a failed re-plan again", async () => {
    let calls = 0;
    const { kernel, file, replace } = await watchShadow(async () => {
      calls += 1;
      if (calls === 2) throw new Error("the container runtime is restarting");
      return [];
    });
    const first = file();
    if (!first) throw new Error("the trapped file is not watched");
    const next = replace(1);
    kernel.emit(makeEvent(1, { key: first.key, slot: first.slot, accesses: [], mask: 0, change: "deleted" }));
    await until("re-armed after the failure", () => fileKeyId(file()?.key ?? first.key) === next);
    expect(calls).toBeGreaterThanOrEqual(3);
  });
});
