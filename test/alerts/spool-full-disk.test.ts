/**
 * Delivery through a spool on a small real tmpfs (256 KiB) while the callback is down: no
 * crash, no corruption, every alert either delivered or counted as dropped by reason, and
 * what fitted is delivered after the receiver comes back and after a restart. A second,
 * healthy destination keeps its backlog while the first one is dead.
 */
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { DROP_REASONS, type HiveMetrics } from "../../runtime/metrics/metrics.ts";
import { counterValue, makeEvent, makeSource, sleep, testPipeline } from "./fixtures.ts";
import { type Receiver, startReceiver } from "./receiver.ts";
import { mountSmallTmpfs, tmpfsUnavailable } from "./tmpfs.ts";

const FAST = { connectTimeoutMs: 500, responseTimeoutMs: 1_000, backoffBaseMs: 20, backoffMaxMs: 200 };
const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function pipelineOn(dir: string, extra: { maxBytes?: number; maxUnwrittenBytes?: number } = {}) {
  const { pipeline, metrics, logs } = await testPipeline({
    spool: { dir, segmentBytes: 16 * 1024, retryWriteMs: 50, ...extra },
    delivery: FAST,
  });
  let closed = false;
  const close = async () => {
    if (!closed) await pipeline.close();
    closed = true;
  };
  cleanups.push(close);
  return { pipeline, metrics, logs, close };
}

async function drops(metrics: HiveMetrics): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const reason of DROP_REASONS) {
    const n = await counterValue(metrics.alertsDropped, { reason });
    if (n > 0) out[reason] = n;
  }
  return out;
}

const receiverIds = (r: Receiver) => new Set(r.accepted.map((a) => a.id));

describe.skipIf(tmpfsUnavailable())("alert delivery with the spool on a full disk", () => {
  it("counts every alert that does not fit, never corrupts, and delivers what fitted after recovery and after a restart", async () => {
    const disk = mountSmallTmpfs(256);
    cleanups.push(() => disk.unmount());
    const dir = join(disk.dir, "spool");
    const receiver = await startReceiver();
    cleanups.push(() => receiver.close());
    await receiver.down();

    // Phase 1: the callback is down and 4 MiB of alerts meet a 256 KiB disk.
    const first = await pipelineOn(dir, { maxUnwrittenBytes: 64 * 1024 });
    const produced: string[] = [];
    const pad = "p".repeat(1_500);
    for (let i = 0; i < 2_000; i++) {
      const alert = first.pipeline.handle(
        makeEvent(i, { comm: `c${i % 10}` }),
        makeSource("trap-a", receiver.url, {
          annotations: { ...makeSource("t", receiver.url).annotations, path: `/etc/${pad}` },
        }),
      );
      if (alert) produced.push(alert.id);
      if (i % 50 === 49) await sleep(5);
    }
    await sleep(100);
    const phase1 = await drops(first.metrics);
    const writeErrors = await counterValue(first.metrics.spoolWriteErrors, { reason: "enospc" });
    expect(writeErrors).toBeGreaterThan(0);
    expect(phase1.spool_unwritable ?? 0).toBeGreaterThan(0);
    expect(first.pipeline.health().ok).toBe(false);
    // Everything produced is either waiting or counted.
    const waiting = first.pipeline.pending();
    expect(waiting + Object.values(phase1).reduce((a, b) => a + b, 0)).toBe(produced.length);

    // Phase 2: the receiver comes back; everything waiting is delivered, the disk frees up.
    await receiver.up();
    expect(await first.pipeline.drain(20_000)).toBe(true);
    expect(receiverIds(receiver).size).toBe(waiting);
    await sleep(100);
    expect(first.pipeline.health().ok).toBe(true);

    // Phase 3: down again, a smaller burst that fits; the agent restarts before the receiver is back.
    await receiver.down();
    const second: string[] = [];
    for (let i = 0; i < 60; i++) {
      const alert = first.pipeline.handle(makeEvent(i), makeSource("trap-b", receiver.url));
      if (alert) second.push(alert.id);
    }
    await sleep(100);
    await first.close();
    const corrupt = await counterValue(first.metrics.spoolCorruptFiles);
    const reopened = await pipelineOn(dir);
    await receiver.up();
    expect(await reopened.pipeline.drain(20_000)).toBe(true);
    const ids = receiverIds(receiver);
    for (const id of second) expect(ids.has(id)).toBe(true);
    expect(await counterValue(reopened.metrics.spoolCorruptFiles)).toBe(0);
    expect(corrupt).toBe(0);
    expect(await drops(reopened.metrics)).toEqual({});
    console.log(
      `small tmpfs: produced ${produced.length}, delivered ${waiting} after recovery, dropped ${JSON.stringify(phase1)}, ` +
        `write errors (enospc) ${writeErrors}; after restart ${second.length}/${second.length} delivered`,
    );
  });

  it("keeps a healthy destination's backlog while a dead one fills the spool", async () => {
    const disk = mountSmallTmpfs(1024);
    cleanups.push(() => disk.unmount());
    const dead = await startReceiver();
    const healthy = await startReceiver();
    cleanups.push(
      () => dead.close(),
      () => healthy.close(),
    );
    await dead.down();
    await healthy.down();
    const { pipeline, metrics } = await pipelineOn(join(disk.dir, "spool"), { maxBytes: 128 * 1024 });
    // The healthy destination's short outage: 40 alerts wait for it.
    const backlog: string[] = [];
    for (let i = 0; i < 40; i++) {
      const alert = pipeline.handle(makeEvent(i), makeSource("trap-h", healthy.url));
      if (alert) backlog.push(alert.id);
    }
    // The dead destination produces far more than the spool can hold.
    for (let i = 0; i < 1_500; i++) {
      pipeline.handle(makeEvent(i), makeSource("trap-d", dead.url));
      if (i % 100 === 99) await sleep(2);
    }
    await sleep(50);
    await healthy.up();
    await healthy.waitForDistinct(backlog.length, 10_000);
    await sleep(100);
    expect(receiverIds(healthy)).toEqual(new Set(backlog));
    const dropped = await drops(metrics);
    expect(dropped.spool_full ?? 0).toBeGreaterThan(0);
    expect(await counterValue(metrics.alertsDelivered, { destination: new URL(healthy.url).origin })).toBe(
      backlog.length,
    );
  });
});
