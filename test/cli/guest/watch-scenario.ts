/**
 * Runs INSIDE a test VM (test/cli/watch.test.ts boots it): `hive watch` on a policy trapping
 * one file, a callback receiver on 127.0.0.1, `hive status` while it runs, reads of the
 * trapped file and of an untrapped one from separate processes, Ctrl-C, `hive status`
 * again. Prints one line `HIVE-SCENARIO <json>` with everything the host-side test checks.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { HIVE_CLI, spawnWatch, startCallbackReceiver, until } from "../../../examples/demo/watch-session.ts";

// On the guest's root, an overlay of 9p and tmpfs as on nodes whose root is an overlay:
// stat() reports a pseudo device there that no kernel check carries, so the trap is armed on
// the identity the kernel proved (runtime/kernel/trap-proof.ts), for the file and its directory.
const dir = "/var/tmp/hive-cli-test";
const trapped = `${dir}/trapped.txt`;
const other = `${dir}/other.txt`;

const started = Date.now();
const timings: Record<string, number> = {};
const mark = (name: string) => {
  timings[name] = Date.now() - started;
};

function hive(args: string[]) {
  const r = spawnSync(process.execPath, [HIVE_CLI, ...args], { encoding: "utf8", timeout: 60_000 });
  mark(`hive ${args.join(" ")}`);
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

async function main(): Promise<void> {
  spawnSync("/bin/busybox", ["ip", "link", "set", "lo", "up"]);
  mkdirSync(dir, { recursive: true });
  writeFileSync(trapped, "the trapped file\n");
  writeFileSync(other, "an untrapped file\n");
  const policy = `${dir}/policy.yaml`;
  writeFileSync(
    policy,
    [
      "apiVersion: hive-operator.com/v1alpha1",
      "kind: HivePolicy",
      "metadata:",
      "  name: cli-test",
      "spec:",
      "  traps:",
      `    - path: ${trapped}`,
      "",
    ].join("\n"),
  );

  const receiver = await startCallbackReceiver("/alerts");
  const received = receiver.deliveries;
  const watch = spawnWatch(["--policy", policy, "--callback", receiver.url], {
    ...process.env,
    HIVE_LOG_LEVEL: "info",
  });
  /** Re-plans that armed the trap again (on a change of the file or of its directory). */
  const replans = () =>
    (watch.stderr.match(/"msg":"watching".*"reason":"(directory changed|file [a-z]+)/g) ?? []).length;
  const postedBy = (pid: number | undefined) =>
    received.some((r) => (JSON.parse(r.body) as { process: { tgid: number } }).process.tgid === pid);
  const ready = await until(
    () => /"msg":"ready"/.test(watch.stderr) || watch.child.exitCode !== null,
    90_000,
  );
  mark("ready");

  const statusText = hive(["status"]);
  const statusJson = hive(["status", "--json"]);

  // Separate processes, as any user of the machine would touch the files.
  const readOther = spawnSync("cat", [other], { encoding: "utf8" });
  const readTrapped = spawnSync("cat", [trapped], { encoding: "utf8" });
  const readerPid = readTrapped.pid;
  const delivered = await until(() => received.length >= 1, 20_000);
  mark("delivered");
  // Give a stray alert (e.g. for the untrapped read) time to show up before judging.
  await new Promise((r) => setTimeout(r, 1500));

  // Replace the trapped file the way editors and `sed -i` do (write a new file, rename it
  // over the old one): the kernel reports the replacement (an alert), watch re-resolves the
  // path, and a read of the new file must alert too.
  const replacement = `${dir}/trapped.txt.new`;
  writeFileSync(replacement, "the replaced file\n");
  spawnSync("mv", [replacement, trapped]);
  const rewatched = await until(() => replans() >= 1, 20_000);
  mark("rewatched");
  const readReplaced = spawnSync("cat", [trapped], { encoding: "utf8" });
  const deliveredAgain = await until(() => postedBy(readReplaced.pid), 20_000);
  mark("delivered again");

  // Delete the file, then create it again: the directory stays watched while the file is
  // missing, and the new file is armed when it appears.
  spawnSync("rm", [trapped]);
  const noticedMissing = await until(() => /"msg":"trap not watched"/.test(watch.stderr), 20_000);
  const armedBefore = replans();
  writeFileSync(trapped, "created again\n");
  const rearmed = await until(() => replans() > armedBefore, 20_000);
  const readRecreated = spawnSync("cat", [trapped], { encoding: "utf8" });
  const deliveredThird = await until(() => postedBy(readRecreated.pid), 20_000);
  mark("recreated");

  watch.child.kill("SIGINT");
  const watchCode = await watch.exited;
  const statusAfter = hive(["status"]);
  receiver.close();

  const result = {
    timings,
    ready,
    delivered,
    readerPid,
    otherReaderPid: readOther.pid,
    rewatched,
    replacedReaderPid: readReplaced.pid,
    deliveredAgain,
    noticedMissing,
    rearmed,
    recreatedReaderPid: readRecreated.pid,
    deliveredThird,
    trapped,
    other,
    watch: { code: watchCode, stdout: watch.stdout, stderr: watch.stderr },
    received,
    statusText,
    statusJson,
    statusAfter,
  };
  process.stdout.write(`HIVE-SCENARIO ${JSON.stringify(result)}\n`);
}

await main();
