/**
 * Runs INSIDE a test VM (test/cli/watch.test.ts boots it): `hive watch` on a policy trapping
 * one file, a callback receiver on 127.0.0.1, `hive status` while it runs, reads of the
 * trapped file and of an untrapped one from separate processes, Ctrl-C, `hive status`
 * again. Prints one line `HIVE-SCENARIO <json>` with everything the host-side test checks.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";

const HIVE = new URL("../../../runtime/cli/main.ts", import.meta.url).pathname;
// On a tmpfs: in the guest, / is an overlay of 9p and tmpfs, where stat() reports a pseudo
// device for files that is not the device the kernel's inode carries.
const dir = "/run/hive-cli-test";
const trapped = `${dir}/trapped.txt`;
const other = `${dir}/other.txt`;

interface Received {
  headers: http.IncomingHttpHeaders;
  body: string;
}

const started = Date.now();
const timings: Record<string, number> = {};
const mark = (name: string) => {
  timings[name] = Date.now() - started;
};

function hive(args: string[]) {
  const r = spawnSync(process.execPath, [HIVE, ...args], { encoding: "utf8", timeout: 60_000 });
  mark(`hive ${args.join(" ")}`);
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

function waitFor(check: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  return new Promise((resolve) => {
    const tick = () => {
      if (check()) resolve(true);
      else if (Date.now() > deadline) resolve(false);
      else setTimeout(tick, 50);
    };
    tick();
  });
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

  const received: Received[] = [];
  const server = http.createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (c: string) => {
      body += c;
    });
    req.on("end", () => {
      received.push({ headers: req.headers, body });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/alerts`;

  const watch: ChildProcess = spawn(
    process.execPath,
    [HIVE, "watch", "--policy", policy, "--callback", url],
    {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, HIVE_LOG_LEVEL: "info" },
    },
  );
  let stdout = "";
  let stderr = "";
  watch.stdout?.setEncoding("utf8").on("data", (c: string) => {
    stdout += c;
  });
  watch.stderr?.setEncoding("utf8").on("data", (c: string) => {
    stderr += c;
  });
  const exited = new Promise<number | null>((r) => watch.on("exit", (code) => r(code)));
  const ready = await waitFor(() => /"msg":"ready"/.test(stderr) || watch.exitCode !== null, 90_000);
  mark("ready");

  const statusText = hive(["status"]);
  const statusJson = hive(["status", "--json"]);

  // Separate processes, as any user of the machine would touch the files.
  const readOther = spawnSync("cat", [other], { encoding: "utf8" });
  const readTrapped = spawnSync("cat", [trapped], { encoding: "utf8" });
  const readerPid = readTrapped.pid;
  const delivered = await waitFor(() => received.length >= 1, 20_000);
  mark("delivered");
  // Give a stray alert (e.g. for the untrapped read) time to show up before judging.
  await new Promise((r) => setTimeout(r, 1500));

  // Replace the trapped file the way editors and `sed -i` do (write a new file, rename it
  // over the old one): the kernel reports the directory change, watch re-resolves the path,
  // and a read of the new file must alert too.
  const replacement = `${dir}/trapped.txt.new`;
  writeFileSync(replacement, "the replaced file\n");
  spawnSync("mv", [replacement, trapped]);
  const rewatched = await waitFor(() => /"reason":"directory changed"/.test(stderr), 20_000);
  mark("rewatched");
  const readReplaced = spawnSync("cat", [trapped], { encoding: "utf8" });
  const deliveredAgain = await waitFor(() => received.length >= 2, 20_000);
  mark("delivered again");

  // Delete the file, then create it again: the directory stays watched while the file is
  // missing, and the new file is armed when it appears.
  spawnSync("rm", [trapped]);
  const noticedMissing = await waitFor(() => /"msg":"trap not watched"/.test(stderr), 20_000);
  const armedBefore = (stderr.match(/"reason":"directory changed"/g) ?? []).length;
  writeFileSync(trapped, "created again\n");
  const rearmed = await waitFor(
    () => (stderr.match(/"reason":"directory changed"/g) ?? []).length > armedBefore,
    20_000,
  );
  const readRecreated = spawnSync("cat", [trapped], { encoding: "utf8" });
  const deliveredThird = await waitFor(() => received.length >= 3, 20_000);
  mark("recreated");

  watch.kill("SIGINT");
  const watchCode = await exited;
  const statusAfter = hive(["status"]);
  server.close();

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
    watch: { code: watchCode, stdout, stderr },
    received,
    statusText,
    statusJson,
    statusAfter,
  };
  process.stdout.write(`HIVE-SCENARIO ${JSON.stringify(result)}\n`);
}

await main();
