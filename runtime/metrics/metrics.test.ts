import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { buildInfo } from "../build-info.ts";
import { createHiveMetrics, EVENT_DROP_REASONS } from "./metrics.ts";

const manifest = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
  version: string;
};

/** The metric names a scrape exposes (`# TYPE` lines). */
async function exposedNames(text: Promise<string>): Promise<string[]> {
  return [...(await text).matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1] ?? "");
}

describe("Hive's metrics", () => {
  it("export Node's process metrics under their standard names, none under Hive's prefix", async () => {
    const metrics = createHiveMetrics();
    const names = await exposedNames(metrics.registry.metrics());
    expect(names).toEqual(
      expect.arrayContaining([
        "process_cpu_user_seconds_total",
        "process_resident_memory_bytes",
        "process_start_time_seconds",
        "nodejs_heap_size_used_bytes",
        "nodejs_eventloop_lag_p99_seconds",
      ]),
    );
    expect(names.filter((n) => /^hive_(process|nodejs)_/.test(n))).toEqual([]);
  });

  it("export hive_build_info = 1 labelled with the package's version, the program's digest and Node's version", async () => {
    const metrics = createHiveMetrics({ processMetrics: false });
    const info = buildInfo();
    expect(info.version).toBe(manifest.version);
    const text = await metrics.registry.metrics();
    expect(text).toContain(
      `hive_build_info{version="${manifest.version}",program="${info.program}",node_version="${process.version}"} 1`,
    );
  });

  it("name every reason of hive_kernel_events_dropped_total in its help", async () => {
    const text = await createHiveMetrics({ processMetrics: false }).registry.metrics();
    const help = /^# HELP hive_kernel_events_dropped_total (.*)$/m.exec(text)?.[1] ?? "";
    for (const reason of EVENT_DROP_REASONS) expect(help, reason).toContain(`${reason} (`);
  });

  it("report the agent's readiness at scrape time as hive_agent_ready", async () => {
    const metrics = createHiveMetrics({ processMetrics: false });
    let ready = false;
    metrics.observeReadiness(async () => ready);
    expect(await metrics.registry.metrics()).toMatch(/^hive_agent_ready 0$/m);
    ready = true;
    expect(await metrics.registry.metrics()).toMatch(/^hive_agent_ready 1$/m);
  });
});
