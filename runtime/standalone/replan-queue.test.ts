import { describe, expect, it } from "vitest";
import { createLogger } from "../log.ts";
import { createReplanQueue, failedAgain, joinReasons, MAX_RETRY_MS, type Replan } from "./replan-queue.ts";

function capture() {
  const lines: Record<string, unknown>[] = [];
  return { lines, logger: createLogger({}, { level: "debug", sink: (l) => lines.push(JSON.parse(l)) }) };
}

describe("re-plan queue", () => {
  it("runs one re-plan at a time and coalesces the requests that arrive meanwhile into the next", async () => {
    const ran: Replan[] = [];
    let release: () => void = () => undefined;
    const queue = createReplanQueue({
      logger: capture().logger,
      retryMs: 10,
      run: (replan) => {
        ran.push(replan);
        return ran.length === 1 ? new Promise<void>((resolve) => (release = resolve)) : Promise.resolve();
      },
    });
    const first = queue.schedule("start", false);
    await new Promise((r) => setTimeout(r, 0));
    const later = [queue.schedule("a", false), queue.schedule("b", true), queue.schedule("a", false)];
    release();
    await Promise.all([first, ...later]);
    expect(ran).toEqual([
      { full: false, reason: "start" },
      { full: true, reason: "a (+1 more)" },
    ]);
    await queue.stop();
  });

  it("tries a failed re-plan again, says its cause once, and says when re-plans work again", async () => {
    const log = capture();
    let failures = 2;
    const ran: string[] = [];
    const queue = createReplanQueue({
      logger: log.logger,
      retryMs: 5,
      run: async ({ reason }) => {
        ran.push(reason);
        if (failures-- > 0) throw new Error("runtime down");
      },
    });
    await queue.schedule("file deleted", true);
    const deadline = Date.now() + 2000;
    while (ran.length < 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    await queue.stop();
    expect(ran).toEqual(["file deleted", "file deleted", "file deleted"]);
    const failed = log.lines.filter((l) => l.msg === "re-plan failed; the previous watches stay");
    expect(failed.map((l) => [l.level, l.retryInMs])).toEqual([
      ["error", 5],
      ["debug", 10],
    ]);
    expect(log.lines.at(-1)).toMatchObject({ msg: "re-plans work again", after: "runtime down" });
  });

  it("runs nothing once stopped", async () => {
    const ran: string[] = [];
    const queue = createReplanQueue({
      logger: capture().logger,
      retryMs: 5,
      run: async ({ reason }) => void ran.push(reason),
    });
    await queue.stop();
    await queue.schedule("late", true);
    expect(ran).toEqual([]);
  });

  it("doubles the retry delay up to its bound, and says a cause again only when it changes", () => {
    let streak = { count: 0 };
    const seen: [string, number][] = [];
    for (const message of ["a", "a", "b", "b", "b", "b", "b", "b", "b", "b", "b", "b", "b", "b", "b", "b"]) {
      const next = failedAgain(streak, message, 500);
      seen.push([next.level, next.delayMs]);
      streak = next.streak;
    }
    expect(seen.slice(0, 4)).toEqual([
      ["error", 500],
      ["debug", 1000],
      ["error", 2000],
      ["debug", 4000],
    ]);
    expect(seen.at(-1)).toEqual(["debug", MAX_RETRY_MS]);
  });

  it("names the first reason and how many others", () => {
    expect(joinReasons(["x"])).toBe("x");
    expect(joinReasons(["x", "y", "x", "z"])).toBe("x (+2 more)");
    expect(joinReasons([])).toBe("");
  });
});
