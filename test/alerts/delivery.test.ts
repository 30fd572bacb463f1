/**
 * Alert delivery against a real HTTP receiver on 127.0.0.1 with injected faults. In every
 * case: each alert arrives at least once, duplicates are counted exactly by alert id,
 * order within a trap is kept (the dispatcher's promise), every body is a valid Alert, and
 * the metrics agree with what the receiver saw.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { afterEach, describe, expect, it } from "vitest";
import type { Alert } from "../../api/alert.ts";
import {
  type AlertPipeline,
  type AlertPipelineConfig,
  createAlertPipeline,
} from "../../runtime/alerts/pipeline.ts";
import { createHiveMetrics, type HiveMetrics } from "../../runtime/metrics/metrics.ts";
import { assertValidAlert, captureLogger, counterValue, makeEvent, makeSource, sleep } from "./fixtures.ts";
import { type FaultAction, type Receiver, startReceiver } from "./receiver.ts";

const FAST = {
  connectTimeoutMs: 1_000,
  // Generous, so that only the injected slow answers time out even on a loaded CI machine.
  responseTimeoutMs: 1_000,
  backoffBaseMs: 20,
  backoffMaxMs: 200,
  concurrency: 4,
};

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function setup(options: Partial<AlertPipelineConfig> & { receiver?: Receiver } = {}): Promise<{
  pipeline: AlertPipeline;
  receiver: Receiver;
  metrics: HiveMetrics;
  lines: string[];
  logs: Record<string, unknown>[];
}> {
  const receiver = options.receiver ?? (await startReceiver());
  if (!options.receiver) cleanups.push(() => receiver.close());
  const metrics = createHiveMetrics({ processMetrics: false });
  const lines: string[] = [];
  const { logger, lines: logs } = captureLogger();
  const pipeline = await createAlertPipeline({
    logger,
    metrics,
    lines: (l) => lines.push(l),
    rateLimit: false,
    ...options,
    delivery: { ...FAST, ...options.delivery },
  });
  cleanups.push(() => pipeline.close());
  return { pipeline, receiver, metrics, lines, logs };
}

/** Produces `perTrap` alerts for each trap, interleaved, and returns their ids per trap in production order. */
function produce(
  pipeline: AlertPipeline,
  url: string,
  traps: string[],
  perTrap: number,
): Map<string, string[]> {
  const order = new Map<string, string[]>(traps.map((t) => [t, []]));
  for (let i = 0; i < perTrap; i++) {
    for (const trap of traps) {
      const alert = pipeline.handle(makeEvent(i), makeSource(trap, url));
      if (!alert) throw new Error("alert unexpectedly suppressed");
      order.get(trap)?.push(alert.id);
    }
  }
  return order;
}

/** Checks bodies, ids and per-trap order; returns the number of duplicate deliveries. */
function checkReceived(receiver: Receiver, order: Map<string, string[]>): number {
  const firstSeen = new Map<string, Alert>();
  for (const r of receiver.accepted) {
    const alert = JSON.parse(r.body) as Alert;
    assertValidAlert(alert);
    expect(r.headers["hive-alert-id"]).toBe(alert.id);
    expect(r.headers["content-type"]).toBe("application/json");
    if (!firstSeen.has(alert.id)) firstSeen.set(alert.id, alert);
  }
  const expected = [...order.values()].flat();
  expect(new Set(firstSeen.keys())).toEqual(new Set(expected));
  // Order within a trap: the first arrival of each alert follows production order.
  for (const [trap, ids] of order) {
    const arrived = [...firstSeen.values()].filter((a) => a.trap_id === trap).map((a) => a.id);
    expect(arrived, `order of trap ${trap}`).toEqual(ids);
  }
  return receiver.accepted.length - firstSeen.size;
}

async function deliveryTotals(metrics: HiveMetrics, destination: string) {
  return {
    attempts: await counterValue(metrics.deliveryAttempts, { destination }),
    delivered: await counterValue(metrics.alertsDelivered, { destination }),
    failures: await counterValue(metrics.deliveryFailures, { destination }),
    retries: await counterValue(metrics.deliveryRetries, { destination }),
  };
}

describe("alert delivery to a real receiver", () => {
  it("delivers every alert exactly once to a healthy receiver, prints each as one JSON line, keeps order per trap", async () => {
    const { pipeline, receiver, metrics, lines } = await setup();
    const order = produce(pipeline, receiver.url, ["trap-a", "trap-b", "trap-c"], 20);
    expect(await pipeline.drain(10_000)).toBe(true);
    expect(checkReceived(receiver, order)).toBe(0);
    expect(lines).toHaveLength(60);
    for (const line of lines) {
      expect(line.includes("\n")).toBe(false);
      assertValidAlert(JSON.parse(line));
    }
    const origin = new URL(receiver.url).origin;
    expect(await deliveryTotals(metrics, origin)).toEqual({
      attempts: 60,
      delivered: 60,
      failures: 0,
      retries: 0,
    });
    expect(
      await counterValue(metrics.alerts, {
        trap_id: "trap-a",
        policy: "shadow-watch",
        policy_namespace: "security",
      }),
    ).toBe(20);
  });

  it("keeps at most `concurrency` requests open per destination, over reused keep-alive connections", async () => {
    const { pipeline, receiver } = await setup();
    receiver.fault = () => ({ kind: "delay", ms: 30 }); // answered in time, but held open a while
    const traps = Array.from({ length: 8 }, (_, i) => `trap-${i}`);
    const order = produce(pipeline, receiver.url, traps, 5);
    expect(await pipeline.drain(10_000)).toBe(true);
    expect(checkReceived(receiver, order)).toBe(0);
    expect(receiver.maxConcurrent).toBe(4);
    expect(receiver.connections).toBe(4);
  });

  it("keeps alerts while the receiver is down and delivers them all once it is back", async () => {
    const { pipeline, receiver, metrics } = await setup();
    await receiver.down();
    const order = produce(pipeline, receiver.url, ["trap-a", "trap-b"], 15);
    await sleep(400);
    const origin = new URL(receiver.url).origin;
    expect(pipeline.pending()).toBe(30);
    expect(
      await counterValue(metrics.deliveryFailures, { destination: origin, class: "refused" }),
    ).toBeGreaterThan(0);
    expect(await counterValue(metrics.alertsDelivered)).toBe(0);
    await receiver.up();
    expect(await pipeline.drain(10_000)).toBe(true);
    expect(checkReceived(receiver, order)).toBe(0);
    const t = await deliveryTotals(metrics, origin);
    expect(t.delivered).toBe(30);
    expect(t.attempts).toBe(t.delivered + t.failures);
    expect(t.retries).toBe(t.failures);
    expect(receiver.requests).toBe(30);
  });

  it("retries 500 responses until they succeed", async () => {
    const { pipeline, receiver, metrics } = await setup();
    receiver.fault = (n) => (n <= 10 ? { kind: "status", status: 500 } : { kind: "ok" });
    const order = produce(pipeline, receiver.url, ["trap-a", "trap-b"], 10);
    expect(await pipeline.drain(10_000)).toBe(true);
    expect(checkReceived(receiver, order)).toBe(0);
    const origin = new URL(receiver.url).origin;
    expect(await counterValue(metrics.deliveryFailures, { destination: origin, class: "http_5xx" })).toBe(10);
    expect(await deliveryTotals(metrics, origin)).toEqual({
      attempts: 30,
      delivered: 20,
      failures: 10,
      retries: 10,
    });
  });

  it("honours 429 Retry-After for the whole destination", async () => {
    const { pipeline, receiver, metrics } = await setup();
    const rejectedAt: number[] = [];
    receiver.fault = (n) => {
      if (n === 1) {
        rejectedAt.push(Date.now());
        return { kind: "status", status: 429, headers: { "retry-after": "1" } };
      }
      return { kind: "ok" };
    };
    // One trap first, so the 429 is the very first request; then more traps while paused.
    const order = produce(pipeline, receiver.url, ["trap-a"], 1);
    await sleep(100);
    const more = produce(pipeline, receiver.url, ["trap-b", "trap-c"], 5);
    for (const [k, v] of more) order.set(k, v);
    expect(await pipeline.drain(10_000)).toBe(true);
    expect(checkReceived(receiver, order)).toBe(0);
    const firstAccepted = Math.min(...receiver.accepted.map((r) => r.at));
    expect(firstAccepted - (rejectedAt[0] as number)).toBeGreaterThanOrEqual(950);
    const origin = new URL(receiver.url).origin;
    expect(await counterValue(metrics.deliveryFailures, { destination: origin, class: "http_429" })).toBe(1);
  });

  it("retries a response slower than the timeout, and the receiver can drop the duplicate by id", async () => {
    const { pipeline, receiver, metrics } = await setup({ delivery: { responseTimeoutMs: 300 } });
    // The receiver processes (records) these requests but answers after the client's timeout.
    receiver.fault = (n) => (n <= 3 ? { kind: "delay", ms: 900 } : { kind: "ok" });
    const order = produce(pipeline, receiver.url, ["trap-a", "trap-b", "trap-c"], 4);
    expect(await pipeline.drain(10_000)).toBe(true);
    await sleep(1_000); // let the slow answers land on the receiver
    const duplicates = checkReceived(receiver, order);
    const origin = new URL(receiver.url).origin;
    const timeouts = await counterValue(metrics.deliveryFailures, { destination: origin, class: "timeout" });
    // At least the three slow ones (a loaded machine may add more); each timed-out request was
    // processed by the receiver and sent again, so duplicates match timeouts exactly.
    expect(timeouts).toBeGreaterThanOrEqual(3);
    expect(duplicates).toBe(timeouts);
    const t = await deliveryTotals(metrics, origin);
    expect(t).toEqual({ attempts: 12 + timeouts, delivered: 12, failures: timeouts, retries: timeouts });
  });

  it("retries connections reset mid-request", async () => {
    const { pipeline, receiver, metrics } = await setup();
    receiver.fault = (n) => (n % 3 === 1 && n < 15 ? { kind: "reset" } : { kind: "ok" });
    const order = produce(pipeline, receiver.url, ["trap-a", "trap-b"], 8);
    expect(await pipeline.drain(10_000)).toBe(true);
    expect(checkReceived(receiver, order)).toBe(0);
    const origin = new URL(receiver.url).origin;
    const resets = await counterValue(metrics.deliveryFailures, { destination: origin, class: "reset" });
    expect(resets).toBe(5);
    expect(await deliveryTotals(metrics, origin)).toEqual({
      attempts: 21,
      delivered: 16,
      failures: 5,
      retries: 5,
    });
  });

  it("reports a permanent 4xx once and does not retry it, while other alerts flow", async () => {
    const { pipeline, receiver, metrics, logs } = await setup();
    let rejectId = "";
    receiver.fault = (_n, req) =>
      req.headers["hive-alert-id"] === rejectId ? { kind: "status", status: 422 } : { kind: "ok" };
    const rejected = pipeline.handle(makeEvent(0), makeSource("trap-x", receiver.url)) as Alert;
    rejectId = rejected.id;
    const order = produce(pipeline, receiver.url, ["trap-a"], 5);
    expect(await pipeline.drain(10_000)).toBe(true);
    order.set("trap-x", []);
    expect(checkReceived(receiver, order)).toBe(0);
    expect(receiver.requests).toBe(6);
    expect(await counterValue(metrics.alertsDropped, { reason: "permanent_failure" })).toBe(1);
    expect(await counterValue(metrics.deliveryFailures, { class: "http_4xx" })).toBe(1);
    const error = logs.find((l) => (l.error as { code?: string } | undefined)?.code === "DeliveryFailed");
    expect(error?.level).toBe("error");
    expect((error?.error as { details?: { status?: number } } | undefined)?.details?.status).toBe(422);
  });

  it("without a spool, bounds memory by dropping the oldest undelivered alerts and counting them", async () => {
    const { pipeline, receiver, metrics } = await setup({ delivery: { maxPendingBytes: 16 * 1024 } });
    await receiver.down();
    const order = produce(pipeline, receiver.url, ["trap-a"], 100);
    const dropped = await counterValue(metrics.alertsDropped, { reason: "spool_full" });
    expect(dropped).toBeGreaterThan(50);
    expect(pipeline.pending()).toBe(100 - dropped);
    expect((await metrics.spoolBytes.get()).values[0]?.value).toBeLessThanOrEqual(16 * 1024);
    // The bound the spool-filling alert divides by is the one configured.
    expect((await metrics.spoolCapacityBytes.get()).values[0]?.value).toBe(16 * 1024);
    await receiver.up();
    expect(await pipeline.drain(10_000)).toBe(true);
    expect(
      checkReceived(receiver, new Map([["trap-a", (order.get("trap-a") as string[]).slice(dropped)]])),
    ).toBe(0);
  });

  it("reports an alert whose callback is not an http(s) URL as undeliverable, without crashing", async () => {
    const { pipeline, metrics, lines, logs } = await setup();
    const alert = pipeline.handle(makeEvent(1), makeSource("trap-bad", "ftp://files.example/alerts"));
    expect(alert).toBeDefined();
    expect(lines).toHaveLength(1);
    expect(pipeline.pending()).toBe(0);
    expect(await counterValue(metrics.alertsDropped, { reason: "permanent_failure" })).toBe(1);
    expect(logs.some((l) => (l.error as { code?: string } | undefined)?.code === "DeliveryFailed")).toBe(
      true,
    );
  });

  it("sends alerts of traps without a callback to the monitor's default callback", async () => {
    const receiver = await startReceiver();
    cleanups.push(() => receiver.close());
    const { pipeline } = await setup({ receiver, defaultCallback: receiver.url });
    const alert = pipeline.handle(makeEvent(1), makeSource("trap-default")) as Alert;
    expect(await pipeline.drain(5_000)).toBe(true);
    expect(receiver.accepted.map((r) => r.id)).toEqual([alert.id]);
  });
});

describe("delivery under random fault sequences", () => {
  const fault = fc.constantFrom<FaultAction>(
    { kind: "ok" },
    { kind: "status", status: 500 },
    { kind: "status", status: 503, headers: { "retry-after": "0" } },
    { kind: "reset" },
    { kind: "delay", ms: 500 },
  );

  it("delivers every alert, keeps order per trap, and the metrics and duplicates add up exactly", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fault, { minLength: 1, maxLength: 40 }), async (faults) => {
        const { pipeline, receiver, metrics } = await setup({ delivery: { responseTimeoutMs: 300 } });
        try {
          // The scripted faults answer the first requests; every later request succeeds.
          receiver.fault = (n) => faults[n - 1] ?? { kind: "ok" };
          const order = produce(pipeline, receiver.url, ["trap-a", "trap-b", "trap-c"], 6);
          expect(await pipeline.drain(20_000)).toBe(true);
          await sleep(550); // late answers of the slow requests
          const duplicates = checkReceived(receiver, order);
          const origin = new URL(receiver.url).origin;
          const t = await deliveryTotals(metrics, origin);
          const timeouts = await counterValue(metrics.deliveryFailures, {
            destination: origin,
            class: "timeout",
          });
          expect(t.delivered).toBe(18);
          expect(t.attempts).toBe(t.delivered + t.failures);
          expect(t.attempts).toBe(receiver.requests);
          expect(t.retries).toBe(t.failures);
          // A slow request was processed by the receiver before the client gave up: one duplicate each.
          expect(duplicates).toBe(timeouts);
        } finally {
          await pipeline.close();
          await receiver.close();
        }
      }),
      { numRuns: 6 },
    );
  }, 60_000);
});

describe("spooled delivery across restarts and bounds", () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });
  const spoolDir = () => {
    const d = mkdtempSync(join(tmpdir(), "hive-spool-"));
    dirs.push(d);
    return d;
  };

  it("delivers after a restart the alerts spooled during an outage before it", async () => {
    const dir = spoolDir();
    const receiver = await startReceiver();
    cleanups.push(() => receiver.close());
    await receiver.down();
    const first = await setup({ receiver, spool: { dir } });
    const before = produce(first.pipeline, receiver.url, ["trap-a", "trap-b"], 10);
    await sleep(200);
    expect(await counterValue(first.metrics.deliveryFailures, { class: "refused" })).toBeGreaterThan(0);
    await first.pipeline.close();

    await receiver.up();
    const second = await setup({ receiver, spool: { dir } });
    expect(second.pipeline.pending()).toBe(20);
    const after = produce(second.pipeline, receiver.url, ["trap-a", "trap-b"], 3);
    expect(await second.pipeline.drain(10_000)).toBe(true);
    const order = new Map([...before].map(([trap, ids]) => [trap, [...ids, ...(after.get(trap) ?? [])]]));
    expect(checkReceived(receiver, order)).toBe(0);
    expect(await counterValue(second.metrics.alertsDelivered)).toBe(26);
    await second.pipeline.close();
    // Everything delivered: the spool is empty again.
    const third = await setup({ receiver, spool: { dir } });
    expect(third.pipeline.pending()).toBe(0);
  });

  it("delivers after an agent killed mid-outage (SIGKILL, no shutdown) everything it had produced", async () => {
    const dir = spoolDir();
    const receiver = await startReceiver();
    cleanups.push(() => receiver.close());
    await receiver.down();
    // A separate agent process that spools alerts for an unreachable callback, then is killed.
    const here = new URL(".", import.meta.url).href;
    const script = `
      const { createAlertPipeline } = await import(${JSON.stringify(new URL("../../runtime/alerts/pipeline.ts", here).href)});
      const { createHiveMetrics } = await import(${JSON.stringify(new URL("../../runtime/metrics/metrics.ts", here).href)});
      const { createLogger } = await import(${JSON.stringify(new URL("../../runtime/log.ts", here).href)});
      const { makeEvent, makeSource } = await import(${JSON.stringify(new URL("./fixtures.ts", here).href)});
      const pipeline = await createAlertPipeline({
        logger: createLogger({}, { level: "error", sink: () => {} }), metrics: createHiveMetrics({ processMetrics: false }),
        lines: false, procRoot: false, rateLimit: false, spool: { dir: ${JSON.stringify(dir)} },
        delivery: { backoffBaseMs: 20, backoffMaxMs: 100 },
      });
      const ids = [];
      for (let i = 0; i < 40; i++) ids.push(pipeline.handle(makeEvent(i), makeSource("trap-" + (i % 2), ${JSON.stringify(receiver.url)})).id);
      setTimeout(() => process.stdout.write(JSON.stringify(ids) + "\\n"), 100);
      setInterval(() => {}, 1000);
    `;
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    const ids = await new Promise<string[]>((resolve, reject) => {
      let out = "";
      child.stdout?.on("data", (c: Buffer) => {
        out += c.toString();
        if (out.includes("\n")) resolve(JSON.parse(out));
      });
      child.once("exit", (code) => reject(new Error(`agent process exited early (${code})`)));
    });
    child.kill("SIGKILL");
    await new Promise((r) => child.once("exit", r));

    await receiver.up();
    const { pipeline } = await setup({ receiver, spool: { dir } });
    expect(pipeline.pending()).toBe(40);
    expect(await pipeline.drain(10_000)).toBe(true);
    const order = new Map([
      ["trap-0", ids.filter((_, i) => i % 2 === 0)],
      ["trap-1", ids.filter((_, i) => i % 2 === 1)],
    ]);
    expect(checkReceived(receiver, order)).toBe(0);
  });

  it("closes promptly while a receiver never answers, and delivers those alerts after the restart", async () => {
    const dir = spoolDir();
    const receiver = await startReceiver();
    cleanups.push(() => receiver.close());
    receiver.fault = () => ({ kind: "hang" });
    const first = await setup({ receiver, spool: { dir }, delivery: { responseTimeoutMs: 60_000 } });
    const order = produce(first.pipeline, receiver.url, ["trap-a", "trap-b", "trap-c"], 2);
    await sleep(100);
    expect(receiver.requests).toBe(3);
    const t0 = Date.now();
    await first.pipeline.close();
    expect(Date.now() - t0).toBeLessThan(2_000);
    expect(first.pipeline.health()).toEqual({ ok: true });

    receiver.fault = () => ({ kind: "ok" });
    const second = await setup({ receiver, spool: { dir } });
    expect(await second.pipeline.drain(10_000)).toBe(true);
    expect(checkReceived(receiver, order)).toBe(0);
  });

  it("drops and reports an alert whose spooled bytes were damaged before delivery, and delivers the rest", async () => {
    const dir = spoolDir();
    const receiver = await startReceiver();
    cleanups.push(() => receiver.close());
    await receiver.down();
    const { pipeline, metrics, logs } = await setup({ receiver, spool: { dir } });
    const order = produce(pipeline, receiver.url, ["trap-a", "trap-b"], 3);
    await sleep(50); // spooled to disk
    const damaged = (order.get("trap-a") as string[])[1] as string;
    const [segment] = readdirSync(dir).filter((f) => f.endsWith(".log"));
    const file = join(dir, segment as string);
    const data = readFileSync(file);
    const at = data.indexOf(damaged) + 200; // inside that alert's body
    data[at] = (data[at] as number) ^ 0x20;
    writeFileSync(file, data);
    await receiver.up();
    expect(await pipeline.drain(10_000)).toBe(true);
    const expected = new Map([...order].map(([trap, ids]) => [trap, ids.filter((id) => id !== damaged)]));
    expect(checkReceived(receiver, expected)).toBe(0);
    expect(await counterValue(metrics.alertsDropped, { reason: "spool_corrupt" })).toBe(1);
    expect(logs.some((l) => (l.error as { code?: string } | undefined)?.code === "SpoolCorrupt")).toBe(true);
  });

  it("drops the oldest alerts when the spool is full, counts them, and delivers the rest", async () => {
    const dir = spoolDir();
    const receiver = await startReceiver();
    cleanups.push(() => receiver.close());
    await receiver.down();
    const { pipeline, metrics, logs } = await setup({
      receiver,
      spool: { dir, maxBytes: 64 * 1024, segmentBytes: 4096 },
    });
    const order = produce(pipeline, receiver.url, ["trap-a"], 200);
    const ids = order.get("trap-a") as string[];
    const dropped = await counterValue(metrics.alertsDropped, { reason: "spool_full" });
    expect(dropped).toBeGreaterThan(0);
    expect(pipeline.pending()).toBe(200 - dropped);
    expect(logs.some((l) => (l.error as { code?: string } | undefined)?.code === "SpoolFull")).toBe(true);
    const gauge = (await metrics.spoolBytes.get()).values[0]?.value ?? 0;
    expect(gauge).toBeLessThanOrEqual(64 * 1024);
    expect((await metrics.spoolCapacityBytes.get()).values[0]?.value).toBe(64 * 1024);
    await receiver.up();
    expect(await pipeline.drain(10_000)).toBe(true);
    // Exactly the newest alerts arrive: the dropped ones are the oldest.
    expect(checkReceived(receiver, new Map([["trap-a", ids.slice(dropped)]]))).toBe(0);
  });
});
