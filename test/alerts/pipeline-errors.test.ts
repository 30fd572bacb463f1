/**
 * An event the alert pipeline fails on is not silently gone: the agent keeps running, the event
 * is counted (hive_kernel_events_dropped_total{reason="pipeline_error"}) and logged with what
 * identifies the access, and the next event alerts as usual.
 */
import { describe, expect, it } from "vitest";
import type { AlertSource } from "../../runtime/alerts/alert-source.ts";
import { createAlertPipeline } from "../../runtime/alerts/pipeline.ts";
import { createHiveMetrics } from "../../runtime/metrics/metrics.ts";
import { captureLogger, counterValue, makeEvent, makeSource } from "./fixtures.ts";

describe("an alert pipeline failure", () => {
  it("is counted and logged, and the next event still alerts", async () => {
    const metrics = createHiveMetrics({ processMetrics: false });
    const lines: string[] = [];
    const log = captureLogger();
    const pipeline = await createAlertPipeline({ logger: log.logger, metrics, lines: (l) => lines.push(l) });
    try {
      // A source that fails when read: any bug between the kernel event and the alert.
      const broken = new Proxy(makeSource("broken"), {
        get(target, key) {
          if (key === "labels") throw new Error("injected failure reading the source");
          return Reflect.get(target, key);
        },
      }) as AlertSource;
      expect(() => pipeline.handle(makeEvent(1), broken)).not.toThrow();
      expect(await counterValue(metrics.kernelEventsDropped, { reason: "pipeline_error" })).toBe(1);
      const logged = log.lines.find((l) => String(l.msg).includes("counted as dropped"));
      expect(logged?.tgid).toBe(makeEvent(1).tgid);
      pipeline.handle(makeEvent(2), makeSource("fine"));
      expect(lines).toHaveLength(1);
    } finally {
      await pipeline.close();
    }
  });
});
