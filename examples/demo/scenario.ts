/**
 * The demo itself, run where the kernel can attach Hive's program (this machine, or the
 * stock kernel examples/demo/main.ts boots in QEMU): a callback receiver on 127.0.0.1,
 * `hive watch` on examples/policies/demo-secret.yaml, a read of the trapped file by another
 * process, and the alert exactly as the receiver got it. Where containerd and runc are
 * installed, also a real container named hive-demo-web (a private containerd, busybox
 * rootfs) whose own /etc/hive-demo-secret is trapped and read from inside it. Exit 0 when
 * every alert arrived.
 */
import { spawnSync } from "node:child_process";
import { existsSync, rmSync } from "node:fs";
import {
  type Containerd,
  containersAvailable,
  startContainerd,
} from "../../test/containers/containerd-harness.ts";
import { spawnWatch, startCallbackReceiver, until } from "./watch-session.ts";

const POLICY = new URL("../policies/demo-secret.yaml", import.meta.url).pathname;
const TRAPPED = "/run/hive-demo-secret";
const CONTAINER = "hive-demo-web";
const IN_CONTAINER = "/etc/hive-demo-secret";
const say = (text: string) => process.stdout.write(`${text}\n`);

async function main(): Promise<number> {
  // A freshly booted guest has its loopback interface down; on a host this is a no-op.
  spawnSync("busybox", ["ip", "link", "set", "lo", "up"]);
  const existed = existsSync(TRAPPED);
  const containerd = await startDemoContainer();
  const receiver = await startCallbackReceiver("/hive-alerts");
  say(`[demo] callback receiver listening on ${receiver.url}`);
  say(`[demo] starting: hive watch --policy examples/policies/demo-secret.yaml --callback ${receiver.url}`);
  const watch = spawnWatch([
    "--policy",
    POLICY,
    "--callback",
    receiver.url,
    ...(containerd ? ["--containerd", containerd.socket] : ["--no-containers"]),
  ]);

  const ready = await until(
    () => /"msg":"ready"/.test(watch.stderr) || watch.child.exitCode !== null,
    120_000,
  );
  if (!ready || watch.child.exitCode !== null) {
    say(
      `[demo] hive watch did not arm its trap (exit ${await Promise.race([watch.exited, Promise.resolve(null)])}):`,
    );
    say(watch.stderr.trim());
    receiver.close();
    watch.child.kill("SIGKILL");
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
  watch.child.kill("SIGINT");
  const code = await watch.exited;
  receiver.close();
  await containerd?.stop();
  if (!existed) rmSync(TRAPPED, { force: true });
  if (!arrived) {
    say(
      `[demo] ${receiver.deliveries.length} of ${expected} alerts reached the receiver within 30 s. hive watch logged:`,
    );
    say(watch.stderr.trim());
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
    `[demo] hive watch printed ${watch.stdout.split("\n").filter(Boolean).length} alert line(s) on stdout too`,
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
