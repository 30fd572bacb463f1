import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createLogger } from "../log.ts";
import { NodeLockElector } from "./node-lock.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function elector(path: string, events: string[]) {
  return new NodeLockElector({
    path,
    retryPeriodMs: 50,
    logger: createLogger({}, { level: "error" }),
    onStartedLeading: () => {
      events.push("started");
    },
    onStoppedLeading: () => {
      events.push("stopped");
    },
  });
}

const until = async (check: () => boolean, ms = 3000) => {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 10));
  }
};

describe("the loader's node-local lock", () => {
  it("admits one holder per lock file, and frees it the moment the holder is SIGKILLed", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hive-lock-"));
    dirs.push(dir);
    const path = join(dir, "run", "hive.loader.lock");
    // Another agent of the same node: a separate process holding the lock.
    const holder = spawn(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        `import { NodeLockElector } from ${JSON.stringify(join(import.meta.dirname, "node-lock.ts"))};
         import { createLogger } from ${JSON.stringify(join(import.meta.dirname, "../log.ts"))};
         new NodeLockElector({ path: ${JSON.stringify(path)}, logger: createLogger({}, { level: "error" }),
           onStartedLeading: () => console.log("held"), onStoppedLeading: () => {} }).start();
         setInterval(() => {}, 1000);`,
      ],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    let held = false;
    holder.stdout.on("data", (b: Buffer) => {
      if (b.toString().includes("held")) held = true;
    });
    await until(() => held, 10_000);

    const events: string[] = [];
    const mine = elector(path, events);
    mine.start();
    await new Promise((r) => setTimeout(r, 300));
    expect(events).toEqual([]); // never two holders

    holder.kill("SIGKILL");
    await until(() => events.includes("started"), 2000);
    await mine.stop();
    expect(events).toEqual(["started", "stopped"]);

    // Released on stop: the next agent takes it at once.
    const next: string[] = [];
    const third = elector(path, next);
    third.start();
    await until(() => next.includes("started"), 1000);
    await third.stop();
  });
});
