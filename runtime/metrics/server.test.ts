import { afterEach, describe, expect, it } from "vitest";
import { createHealth } from "./health.ts";
import { createHiveMetrics } from "./metrics.ts";
import { type MetricsServer, startMetricsServer } from "./server.ts";

let server: MetricsServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

describe("metrics server", () => {
  it("serves Hive's metrics in Prometheus text format, including kernel counters read at scrape time", async () => {
    const metrics = createHiveMetrics();
    let lost = 5n;
    metrics.observeKernel(() => ({ events: 100n, lost, watched: 7 }));
    metrics.alertsDropped.inc({ reason: "spool_full" }, 3);
    server = await startMetricsServer({
      registry: metrics.registry,
      health: createHealth(),
      port: 0,
      host: "127.0.0.1",
    });
    const res = await fetch(`${server.url}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/plain");
    const text = await res.text();
    expect(text).toContain('hive_alerts_dropped_total{reason="spool_full"} 3');
    expect(text).toContain("hive_kernel_events_lost_total 5");
    expect(text).toContain("hive_kernel_events_total 100");
    expect(text).toContain("hive_watched_files 7");
    expect(text).toMatch(/^process_cpu_user_seconds_total /m);
    lost = 8n;
    expect(await (await fetch(`${server.url}/metrics`)).text()).toContain("hive_kernel_events_lost_total 8");
  });

  it("reports the path resolver's stuck threads as a gauge and its timed-out walks as a counter, read at scrape time", async () => {
    const metrics = createHiveMetrics({ processMetrics: false });
    const text = async () => (await metrics.registry.metrics()).split("\n");
    expect(await text()).toContain("hive_resolve_stuck_threads 0");
    let stats = { stuck: 2, timeouts: 3 };
    metrics.observeResolver(() => stats);
    expect(await text()).toEqual(
      expect.arrayContaining(["hive_resolve_stuck_threads 2", "hive_resolve_timeouts_total 3"]),
    );
    stats = { stuck: 0, timeouts: 5 }; // the stuck lookups returned; two more walks timed out
    expect(await text()).toEqual(
      expect.arrayContaining(["hive_resolve_stuck_threads 0", "hive_resolve_timeouts_total 5"]),
    );
  });

  it("answers /readyz from the registered checks and /healthz from the liveness checks", async () => {
    const health = createHealth();
    let synced = false;
    health.addReadinessCheck("informers-synced", () => ({ ok: synced, message: "pods informer not synced" }));
    health.addReadinessCheck("throws", () => true);
    server = await startMetricsServer({
      registry: createHiveMetrics({ processMetrics: false }).registry,
      health,
      port: 0,
      host: "127.0.0.1",
    });
    const notReady = await fetch(`${server.url}/readyz?verbose`);
    expect(notReady.status).toBe(503);
    expect(await notReady.text()).toContain("[-]informers-synced failed: pods informer not synced");
    synced = true;
    expect((await fetch(`${server.url}/readyz`)).status).toBe(200);
    health.addReadinessCheck("throws", () => {
      throw new Error("boom");
    });
    expect((await fetch(`${server.url}/readyz`)).status).toBe(503);
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    expect((await fetch(`${server.url}/nope`)).status).toBe(404);
    expect((await fetch(`${server.url}/metrics`, { method: "POST" })).status).toBe(405);
  });

  it("reports a busy port as a configuration error naming the port", async () => {
    const registry = createHiveMetrics({ processMetrics: false }).registry;
    server = await startMetricsServer({ registry, health: createHealth(), port: 0, host: "127.0.0.1" });
    await expect(
      startMetricsServer({ registry, health: createHealth(), port: server.port, host: "127.0.0.1" }),
    ).rejects.toMatchObject({
      code: "ConfigInvalid",
      object: `127.0.0.1:${server.port}`,
    });
  });
});
