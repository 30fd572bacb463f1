/**
 * An agent's alert path over the real kernel, as a process a kernel case can SIGKILL: it adopts
 * the pinned maps, turns every event of the watched slot into an alert through the pipeline
 * (spool on the given directory, delivery to the callback) and lets the spool gate the ring's
 * release, as the agent does. Reports `event <tgid>` per event handled; answers `state` on stdin
 * with one JSON line of the ring's and the spool's state.
 * Arguments: pin root, burst gap (ms), slot, spool directory, callback URL, max unwritten bytes.
 */
import { createAlertPipeline } from "../../../runtime/alerts/pipeline.ts";
import { openKernelWatcher } from "../../../runtime/kernel/open-watcher.ts";
import { createLogger } from "../../../runtime/log.ts";
import { createHiveMetrics, DROP_REASONS } from "../../../runtime/metrics/metrics.ts";
import { makeSource } from "../../alerts/fixtures.ts";

const [pinRoot, gapMs, slot, spoolDir, callback, maxUnwritten] = process.argv.slice(2);
const logger = createLogger({ component: "spooling-agent" }, { level: "warn" });
const metrics = createHiveMetrics({ processMetrics: false });
// One event per batch: reading pauses as soon as alerts can wait no more (the default, 256, is
// the same rule at a production memory budget).
const watcher = openKernelWatcher({ pinRoot: pinRoot ?? null, burstGapMs: Number(gapMs), maxBatch: 1 });
const alerts = await createAlertPipeline({
  logger,
  metrics,
  lines: false,
  rateLimit: false,
  spool: { dir: spoolDir as string, maxUnwrittenBytes: Number(maxUnwritten), retryWriteMs: 100 },
  delivery: { connectTimeoutMs: 500, responseTimeoutMs: 1_000, backoffBaseMs: 50, backoffMaxMs: 200 },
});
watcher.gateRelease(alerts.ringGate());
const source = makeSource("durability-case", callback);
watcher.onEvent((event) => {
  if (event.slot !== Number(slot)) return;
  alerts.handle(event, source);
  process.stdout.write(`event ${event.tgid}\n`);
});
await watcher.whenReady();
process.stdin.on("data", async (chunk: Buffer) => {
  if (!chunk.toString().includes("state")) return;
  const dropped: Record<string, number> = {};
  for (const reason of DROP_REASONS) {
    const value =
      (await metrics.alertsDropped.get()).values.find((v) => v.labels.reason === reason)?.value ?? 0;
    if (value > 0) dropped[reason] = value;
  }
  const c = watcher.counters();
  const state = {
    held: c.ringHeld,
    paused: c.ringPaused,
    usedBytes: c.ringUsedBytes,
    lost: String(c.lost),
    dropped,
  };
  process.stdout.write(`state ${JSON.stringify(state)}\n`);
});
process.stdout.write("ready\n");
