import { afterEach, describe, expect, it, vi } from "vitest";
import {
  ANNOTATION_RESULTS_OMITTED,
  type PolicyReport,
  REPORT_NAME,
  type ReportResult,
} from "../../api/report.ts";
import { createLogger } from "../log.ts";
import { buildReport, createReportWriter, type ReportClient, type ReportWriter } from "./report-writer.ts";

const result = (pod: string, r: ReportResult["result"] = "pass"): ReportResult => ({
  policy: "hive-system/shadow",
  rule: "/etc/shadow",
  result: r,
  resources: [{ kind: "Pod", namespace: "team-a", name: pod }],
});

/** A server holding reports by namespace, which echoes every write back through the watch. */
function server(): {
  client: ReportClient;
  held: Map<string, PolicyReport>;
  calls: string[];
  attach(w: ReportWriter): void;
} {
  const held = new Map<string, PolicyReport>();
  const calls: string[] = [];
  let writer: ReportWriter | undefined;
  let version = 0;
  const store = (r: PolicyReport) => {
    const stored = { ...r, metadata: { ...r.metadata, resourceVersion: String(++version) } };
    held.set(r.metadata.namespace, stored);
    queueMicrotask(() => writer?.observe("MODIFIED", stored));
  };
  return {
    held,
    calls,
    attach: (w) => {
      writer = w;
    },
    client: {
      async create(r) {
        calls.push(`create ${r.metadata.namespace}`);
        store(r);
      },
      async replace(r) {
        calls.push(`replace ${r.metadata.namespace}`);
        store(r);
      },
      async remove(ns) {
        calls.push(`delete ${ns}`);
        const gone = held.get(ns);
        held.delete(ns);
        if (gone) queueMicrotask(() => writer?.observe("DELETED", gone));
      },
    },
  };
}

const log = createLogger({}, { level: "error" });

/** A writer (fake timers) attached to a fresh in-memory server. */
function startWriter(debounceMs: number) {
  vi.useFakeTimers();
  const s = server();
  const writer = createReportWriter({
    client: s.client,
    log,
    nodeName: "node-1",
    format: "policyreport",
    debounceMs,
  });
  s.attach(writer);
  return { s, writer };
}
afterEach(() => {
  vi.useRealTimers();
});

describe("buildReport", () => {
  it("counts every result in the summary and keeps the first ones, saying how many it left out", () => {
    const results = [result("a", "fail"), result("b", "error"), result("c"), result("d")];
    const report = buildReport("policyreport", "team-a", results, "node-1", 2);
    expect(report.metadata.name).toBe(REPORT_NAME);
    expect(report.summary).toEqual({ pass: 2, fail: 1, warn: 0, error: 1, skip: 0 });
    expect(report.results?.map((r) => r.resources?.[0]?.name)).toEqual(["a", "b"]);
    expect(report.metadata.annotations?.[ANNOTATION_RESULTS_OMITTED]).toBe("2");
  });
});

describe("the report writer", () => {
  it("writes a namespace at most once per debounce however often its results change, and deletes it when empty", async () => {
    const { s, writer } = startWriter(30_000);
    for (let i = 1; i <= 100; i++) {
      writer.desire(new Map([["team-a", Array.from({ length: i }, (_, n) => result(`p${n}`))]]));
      await vi.advanceTimersByTimeAsync(1000); // 100 changes over 100 s
    }
    await vi.advanceTimersByTimeAsync(30_000);
    // The first write 5 s after the first change, then one per debounce: 5 over 130 s.
    expect(s.calls.length).toBeLessThanOrEqual(5);
    expect(s.calls[0]).toBe("create team-a");
    expect(s.held.get("team-a")?.results).toHaveLength(100);

    writer.desire(new Map());
    await vi.advanceTimersByTimeAsync(30_000);
    expect(s.calls.at(-1)).toBe("delete team-a");
    expect(s.held.has("team-a")).toBe(false);
    writer.stop();
  });

  it("leaves the reports it sees alone until it is first told what they must hold", async () => {
    const { s, writer } = startWriter(1000);
    writer.observe("ADDED", {
      ...buildReport("policyreport", "team-a", [result("web", "fail")], "node-0"),
      metadata: { ...buildReport("policyreport", "team-a", [], "node-0").metadata, resourceVersion: "7" },
    });
    await vi.advanceTimersByTimeAsync(10_000);
    expect(s.calls).toEqual([]);
    writer.desire(new Map([["team-a", [result("web", "fail")]]]));
    await vi.advanceTimersByTimeAsync(10_000);
    expect(s.calls).toEqual([]);
    writer.stop();
  });

  it("puts back a report someone else changed, and writes nothing while the server's copy says the same", async () => {
    const { s, writer } = startWriter(1000);
    writer.desire(new Map([["team-a", [result("web", "fail")]]]));
    await vi.advanceTimersByTimeAsync(5000);
    expect(s.calls).toEqual(["create team-a"]);
    // The same results again: no write.
    writer.desire(new Map([["team-a", [result("web", "fail")]]]));
    await vi.advanceTimersByTimeAsync(5000);
    expect(s.calls).toEqual(["create team-a"]);
    // Forged into pass (as a watch shows it): written back.
    const held = s.held.get("team-a") as PolicyReport;
    writer.observe("MODIFIED", { ...held, results: [result("web", "pass")], summary: { pass: 1 } });
    await vi.advanceTimersByTimeAsync(5000);
    expect(s.calls).toEqual(["create team-a", "replace team-a"]);
    expect(s.held.get("team-a")?.results?.[0]?.result).toBe("fail");
    writer.stop();
  });
});
