import { afterEach, describe, expect, it, vi } from "vitest";
import { createLogger } from "../log.ts";
import { mallocTrim, startMemoryTrim } from "./memory-trim.ts";

describe("giving malloc's free pages back", () => {
  afterEach(() => vi.useRealTimers());

  it("trims once the start is over, then every interval, until stopped; a failure is logged and tried again", () => {
    vi.useFakeTimers();
    const lines: string[] = [];
    const log = createLogger({}, { level: "info", sink: (line) => lines.push(line) });
    let calls = 0;
    const stop = startMemoryTrim(log, {
      firstMs: 1000,
      everyMs: 5000,
      trim: () => {
        calls++;
        if (calls === 2) throw new Error("no");
        return 1;
      },
    });
    vi.advanceTimersByTime(999);
    expect(calls).toBe(0);
    vi.advanceTimersByTime(1);
    expect(calls).toBe(1);
    vi.advanceTimersByTime(10_000);
    expect(calls).toBe(3);
    expect(lines.filter((l) => l.includes("malloc_trim failed"))).toHaveLength(1);
    stop();
    vi.advanceTimersByTime(60_000);
    expect(calls).toBe(3);
  });

  it("finds glibc's malloc_trim on this machine, and it runs", async () => {
    const trim = await mallocTrim();
    expect(trim).toBeDefined();
    expect(() => trim?.()).not.toThrow();
  });
});
