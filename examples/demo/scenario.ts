/**
 * The demo itself, run where the kernel can attach Hive's program (this machine, or the
 * stock kernel examples/demo/main.ts boots in QEMU): a callback receiver on 127.0.0.1,
 * `hive watch` on examples/policies/demo-secret.yaml, a read of the trapped file by another
 * process, and the alert exactly as the receiver got it. Where containerd and runc are
 * installed, also a real container named hive-demo-web (a private containerd, busybox
 * rootfs) whose own /etc/hive-demo-secret is trapped and read from inside it. Exit 0 when
 * every alert arrived.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { existsSync, rmSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import {
  type Containerd,
  containersAvailable,
  startContainerd,
} from "../../test/containers/containerd-harness.ts";

const HIVE = new URL("../../runtime/cli/main.ts", import.meta.url).pathname;
const POLICY = new URL("../policies/demo-secret.yaml", import.meta.url).pathname;
const TRAPPED = "/run/hive-demo-secret";
const CONTAINER = "hive-demo-web";
const IN_CONTAINER = "/etc/hive-demo-secret";
const say = (text: string) => process.stdout.write(`${text}\n`);

interface Delivery {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

function startReceiver(): Promise<{ url: string; deliveries: Delivery[]; close(): void }> {
  const deliveries: Delivery[] = [];
  const server = http.createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (chunk: string) => {
      body += chunk;
    });
    req.on("end", () => {
      deliveries.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers, body });
      res.writeHead(204).end();
    });
  });
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo;
      resolve({ url: `http://127.0.0.1:${port}/hive-alerts`, deliveries, close: () => server.close() });
    });
  });
}

function until(check: () => boolean, timeoutMs: number): Promise<boolean> {
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

async function main(): Promise<number> {
  // A freshly booted guest has its loopback interface down; on a host this is a no-op.
  spawnSync("busybox", ["ip", "link", "set", "lo", "up"]);
  const existed = existsSync(TRAPPED);
  const containerd = await startDemoContainer();
  const receiver = await startReceiver();
  say(`[demo] callback receiver listening on ${receiver.url}`);
  say(`[demo] starting: hive watch --policy examples/policies/demo-secret.yaml --callback ${receiver.url}`);
  const watch: ChildProcess = spawn(
    process.execPath,
    [
      HIVE,
      "watch",
      "--policy",
      POLICY,
      "--callback",
      receiver.url,
      ...(containerd ? ["--containerd", containerd.socket] : ["--no-containers"]),
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let alertsOnStdout = "";
  let logs = "";
  watch.stdout?.setEncoding("utf8").on("data", (chunk: string) => {
    alertsOnStdout += chunk;
  });
  watch.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
    logs += chunk;
  });
  const exited = new Promise<number | null>((resolve) => watch.on("exit", (code) => resolve(code)));

  const ready = await until(() => /"msg":"ready"/.test(logs) || watch.exitCode !== null, 120_000);
  if (!ready || watch.exitCode !== null) {
    say(
      `[demo] hive watch did not arm its trap (exit ${await Promise.race([exited, Promise.resolve(null)])}):`,
    );
    say(logs.trim());
    receiver.close();
    watch.kill("SIGKILL");
    return 1;
  }
  say(
    `[demo] trap armed on ${TRAPPED} (kernel ${spawnSync("uname", ["-r"], { encoding: "utf8" }).stdout.trim()})`,
  );

  // Another process reads the trapped file, as an intruder would.
  const reader = spawnSync("cat", [TRAPPED], { encoding: "utf8" });
  say(`[demo] process ${reader.pid} ran: cat ${TRAPPED}`);

  let expected = 1;
  let arrived = await until(() => receiver.deliveries.length >= expected, 30_000);
  if (arrived && containerd) {
    // A process inside the container reads the container's own file (not the host's).
    await containerd.exec(CONTAINER, ["/bin/busybox", "cat", IN_CONTAINER]);
    say(`[demo] inside container ${CONTAINER}: cat ${IN_CONTAINER}`);
    expected = 2;
    arrived = await until(() => receiver.deliveries.length >= expected, 30_000);
  }
  watch.kill("SIGINT");
  const code = await exited;
  receiver.close();
  await containerd?.stop();
  if (!existed) rmSync(TRAPPED, { force: true });
  if (!arrived) {
    say(
      `[demo] ${receiver.deliveries.length} of ${expected} alerts reached the receiver within 30 s. hive watch logged:`,
    );
    say(logs.trim());
    return 1;
  }
  receiver.deliveries.forEach((delivery, i) => {
    say(`[demo] alert ${i + 1}: the receiver got ${delivery.method} ${delivery.url}`);
    for (const name of ["content-type", "hive-alert-id", "hive-delivery-attempt"]) {
      if (delivery.headers[name] !== undefined) say(`  ${name}: ${String(delivery.headers[name])}`);
    }
    say(JSON.stringify(JSON.parse(delivery.body), null, 2));
  });
  say(
    `[demo] hive watch printed ${alertsOnStdout.split("\n").filter(Boolean).length} alert line(s) on stdout too`,
  );
  say(`[demo] Ctrl-C: hive watch detached and exited ${code}`);
  return code === 0 ? 0 : 1;
}

/** A real container for the container trap, when this machine has containerd and runc. */
async function startDemoContainer(): Promise<Containerd | undefined> {
  const available = containersAvailable();
  if (!available.ok) {
    say(`[demo] no container part: ${available.why}`);
    return undefined;
  }
  say(`[demo] starting a private containerd and a busybox container named ${CONTAINER}`);
  const containerd = await startContainerd();
  try {
    const rootfs = containerd.makeRootfs(CONTAINER, { [IN_CONTAINER.slice(1)]: "the container's secret\n" });
    await containerd.start(CONTAINER, rootfs);
    return containerd;
  } catch (error) {
    await containerd.stop();
    throw error;
  }
}

process.exit(await main());
