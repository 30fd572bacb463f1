/**
 * An agent that arms the watch entries and allow rules given as JSON (bigint inodes as strings) on
 * the pin root, says `ready`, and waits to be SIGKILLed: what a node keeps when its agent dies
 * while a trap denies. Arguments: pin root, entries, rules.
 */
import type { AllowRule, WatchEntry } from "../../../runtime/kernel/contract.ts";
import { openKernelWatcher } from "../../../runtime/kernel/open-watcher.ts";

const [pinRoot, json, rulesJson] = process.argv.slice(2);
const entries = (JSON.parse(json ?? "[]") as Array<WatchEntry & { key: { ino: string } }>).map((e) => ({
  ...e,
  key: { ...e.key, ino: BigInt(e.key.ino) },
}));
const rules = (JSON.parse(rulesJson ?? "[]") as Array<AllowRule & { file: { ino: string } }>).map((r) => ({
  ...r,
  file: { ...r.file, ino: BigInt(r.file.ino) },
}));
const watcher = openKernelWatcher({ pinRoot: pinRoot ?? null });
watcher.sync(entries, rules);
await watcher.whenReady();
process.stdout.write("ready\n");
setInterval(() => {}, 60_000);
