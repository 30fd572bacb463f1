/**
 * An agent that handles events (each reported on stdout as `event <tgid>`) until it reads
 * `block` on stdin; from then its main thread never turns again, so that nothing more is read,
 * handled or acknowledged: an agent stuck or dying with events in the ring, held open for the
 * kernel case to SIGKILL it there. Arguments: pin root, burst gap (ms).
 */
import { openKernelWatcher } from "../../../runtime/kernel/open-watcher.ts";

const [pinRoot, gapMs] = process.argv.slice(2);
const watcher = openKernelWatcher({ pinRoot: pinRoot ?? null, burstGapMs: Number(gapMs) });
watcher.onEvent((event) => process.stdout.write(`event ${event.tgid}\n`));
await watcher.whenReady();
process.stdin.on("data", (chunk: Buffer) => {
  if (!chunk.toString().includes("block")) return;
  process.stdout.write("blocked\n", () =>
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 300_000),
  );
});
process.stdout.write("ready\n");
