/**
 * `npm run demo -- --cluster`: the README on a real one-node cluster, start to finish. The control
 * plane runs on this machine, the node (kubelet, containerd 2) in a stock Linux 6.12 under QEMU;
 * the README's Pulumi program is applied with the real Pulumi CLI and Kubernetes provider; a pod
 * labelled security=high reads /etc/shadow through `kubectl exec`; the alert is printed exactly as
 * the callback receiver got it, then the pod's Event; everything is torn down. Exit 0 when the
 * alert arrived.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startReceiver } from "../../test/alerts/receiver.ts";
import { kubectl } from "../../test/cluster/install.ts";
import {
  type OneNodeCluster,
  quickstart,
  runShadowTest,
  startOneNodeCluster,
} from "../../test/cluster/one-node-cluster.ts";
import { waitFor } from "../../test/cluster/testing.ts";

const say = (text: string) => process.stdout.write(`${text}\n`);
const GUEST_PORT = 8081;

async function readme(cluster: OneNodeCluster, workDir: string, clock: () => string): Promise<boolean> {
  const k = (...args: string[]) => kubectl(cluster.cp, args);
  say(`[demo] pulumi up (examples/quickstart/index.ts, image ${cluster.images.agent.archiveRef})`);
  const up = await quickstart(cluster, "up", { workDir, stack: "demo", guestPort: GUEST_PORT });
  say(`[demo] ${clock()} pulumi up done: ${JSON.stringify(up.changes)}`);
  say(k("-n", "hive-system", "rollout", "status", "daemonset/hive-agent", "--timeout=900s").trim());
  say(`[demo] ${clock()} kubectl run shadow-test --image=debian:bookworm-slim --labels=security=high`);
  runShadowTest(cluster.cp);
  say(`[demo] ${clock()} kubectl exec shadow-test -- cat /etc/shadow`);
  k("exec", "shadow-test", "--", "cat", "/etc/shadow");
  return true;
}

async function main(): Promise<number> {
  const started = Date.now();
  const clock = () => `${Math.round((Date.now() - started) / 1000)} s`;
  const receiver = await startReceiver();
  const workDir = mkdtempSync(join(tmpdir(), "hive-demo-cluster-"));
  let cluster: OneNodeCluster | undefined;
  const ticker = setInterval(() => say(`[demo] … ${clock()}`), 30_000);
  try {
    say(
      "[demo] Hive on a one-node cluster: the README's program, a pod reads /etc/shadow, the alert arrives",
    );
    cluster = await startOneNodeCluster({
      services: { [GUEST_PORT]: receiver.port },
      progress: (m) => say(`[demo] ${m}`),
    });
    await readme(cluster, workDir, clock);
    await waitFor(() => receiver.accepted.length > 0, {
      timeoutMs: 120_000,
      intervalMs: 500,
      what: "the alert",
    });
    const [alert] = receiver.accepted;
    say(`[demo] ${clock()} the callback receiver got:`);
    for (const [name, value] of Object.entries(alert?.headers ?? {})) say(`${name}: ${value}`);
    say("");
    say(JSON.stringify(JSON.parse(alert?.body ?? "{}"), null, 2));
    const k = (...args: string[]) => kubectl(cluster?.cp as OneNodeCluster["cp"], args);
    await waitFor(() => /FileAccessed/.test(k("describe", "pod", "shadow-test")), {
      timeoutMs: 60_000,
      intervalMs: 1000,
    });
    say(`[demo] kubectl describe pod shadow-test (its Events):`);
    say(k("get", "events", "--field-selector", "involvedObject.name=shadow-test,reason=FileAccessed").trim());
    say(
      `[demo] boot: ${Object.entries(cluster.timings)
        .map(([s, ms]) => `${s} ${(ms / 1000).toFixed(0)} s`)
        .join(", ")}`,
    );
    return 0;
  } catch (error) {
    say(`[demo] failed: ${error instanceof Error ? error.message : String(error)}`);
    return 1;
  } finally {
    clearInterval(ticker);
    say(`[demo] tearing down`);
    await cluster?.stop();
    await receiver.close();
    rmSync(workDir, { recursive: true, force: true });
    say(`[demo] took ${clock()} in all`);
  }
}

process.exit(await main());
