/**
 * Ring buffer → decoded events per guest-second, inside the benchmark VM: the loop program
 * opens two watched files in turn (one burst each), and a listener counts what the watcher
 * delivers until every event is through.
 */
import { execFile } from "node:child_process";
import { statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { fileKeyFromStat } from "../../runtime/kernel/layout.ts";
import { openKernelWatcher } from "../../runtime/kernel/open-watcher.ts";

export interface RingRun {
  events: number;
  produceSeconds: number;
  totalSeconds: number;
  eventsPerSecond: number;
}

export interface RingRate extends RingRun {
  lost: number;
  bursts: number;
  /** Each run's events per guest-second; `eventsPerSecond` is their median. */
  perRun: number[];
}

/** Three runs of `events` accesses by `loop` under `root`; the median run with every run's rate. */
export async function measureRingRate(loop: string, root: string, events: number): Promise<RingRate> {
  const watcher = openKernelWatcher({ pinRoot: null, floodBudget: 0 });
  const a = join(root, "ev-a");
  const b = join(root, "ev-b");
  writeFileSync(a, "a");
  writeFileSync(b, "b");
  watcher.sync([
    { key: fileKeyFromStat(statSync(a)), slot: 1, accesses: ["open"], kind: "file" },
    { key: fileKeyFromStat(statSync(b)), slot: 2, accesses: ["open"], kind: "file" },
  ]);
  await watcher.whenReady();
  let received = 0;
  watcher.onEvent(() => received++);
  // Guest time includes the threads' idle waits, which follow the host's clock: runs of the same
  // code vary by a fifth. The median of three runs (the first with the reader's code cold) is told.
  const runs: RingRun[] = [];
  for (let i = 0; i < 3; i++) {
    const before = received;
    const started = process.hrtime.bigint();
    // Not execFileSync: the agent reads while the loop produces, as it does another process's
    // accesses (blocked, it would read nothing until the ring buffer had filled and lost the rest).
    await promisify(execFile)(loop, ["events", a, b, String(events)]);
    const produced = process.hrtime.bigint();
    await watcher.flush(120_000);
    const done = process.hrtime.bigint();
    const delivered = received - before;
    const totalSeconds = Number(done - started) / 1e9;
    runs.push({
      events: delivered,
      produceSeconds: Number(produced - started) / 1e9,
      totalSeconds,
      eventsPerSecond: Math.round(delivered / totalSeconds),
    });
  }
  const median = [...runs].sort((x, y) => x.eventsPerSecond - y.eventsPerSecond)[1] as RingRun;
  const c = watcher.counters();
  await watcher.close();
  return {
    ...median,
    lost: Number(c.lost),
    bursts: Number(c.bursts),
    perRun: runs.map((r) => r.eventsPerSecond),
  };
}
