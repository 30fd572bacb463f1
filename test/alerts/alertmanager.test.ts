/**
 * callback.format `alertmanager` against a real Alertmanager (Debian's prometheus-alertmanager,
 * installed by scripts/debian-packages.txt): started on a loopback port with a minimal
 * configuration and a temporary storage directory, it receives an alert through the real
 * dispatcher and lists it through its own API (`GET /api/v2/alerts`). A missing binary fails
 * this suite: it is a test dependency, never a reason to skip.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { Alert } from "../../api/alert.ts";
import { ALERTNAME, alertmanagerBody } from "../../runtime/alerts/delivery/alertmanager.ts";
import { counterValue, makeEvent, makeSource, sleep, testPipeline } from "./fixtures.ts";
import { assertShape, PostableAlertsSchema } from "./published-shapes.ts";

const BINARY = "/usr/bin/prometheus-alertmanager";

/** A port nobody listens on now (Alertmanager is told its port; it cannot report one it picked). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

interface Alertmanager {
  url: string;
  stop(): Promise<void>;
}

async function startAlertmanager(): Promise<Alertmanager> {
  if (!existsSync(BINARY))
    throw new Error(
      `${BINARY} is missing: install prometheus-alertmanager (scripts/debian-packages.txt; scripts/bootstrap.sh does)`,
    );
  const dir = mkdtempSync(join(tmpdir(), "hive-alertmanager-"));
  const config = join(dir, "alertmanager.yml");
  // The smallest configuration: every alert to a receiver that sends nothing.
  writeFileSync(config, 'route:\n  receiver: "null"\nreceivers:\n  - name: "null"\n');
  const port = await freePort();
  let output = "";
  const child: ChildProcess = spawn(
    BINARY,
    [
      `--config.file=${config}`,
      `--storage.path=${join(dir, "data")}`,
      `--web.listen-address=127.0.0.1:${port}`,
      // No high-availability gossip: it would listen on 0.0.0.0:9094.
      "--cluster.listen-address=",
      "--log.level=warn",
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  child.stdout?.on("data", (b: Buffer) => {
    output += b.toString();
  });
  child.stderr?.on("data", (b: Buffer) => {
    output += b.toString();
  });
  const url = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (child.exitCode === null) {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) break;
    const ready = await fetch(`${url}/-/ready`).then(
      (r) => r.ok,
      () => false,
    );
    if (ready) return { url, stop };
    await sleep(100);
  }
  await stop();
  throw new Error(`Alertmanager did not become ready on ${url}:\n${output}`);
}

let am: Alertmanager | undefined;
afterEach(async () => {
  await am?.stop();
  am = undefined;
});

interface GettableAlert {
  labels: Record<string, string>;
  annotations: Record<string, string>;
  startsAt: string;
  status: { state: string };
}

describe("callback format alertmanager, against a real Alertmanager", () => {
  it("delivers an alert through the dispatcher to /api/v2/alerts, and Alertmanager lists it with Hive's labels", async () => {
    // Started here, not in a hook: without the binary this test fails, it is never reported skipped.
    am = await startAlertmanager();
    const base = am.url;
    const { pipeline, metrics, logs } = await testPipeline({
      // The monitor's callback is Alertmanager's base URL, as a user writes it.
      defaultCallback: base,
      delivery: { destinations: [{ urlPrefix: base, format: "alertmanager" }] },
    });
    const source = makeSource("trap-am-1", undefined, {
      severity: "critical",
      clusterName: "prod-eu-1",
      trapLabels: { team: "payments", "example.com/owner": "sec-ops" },
      pod: { workload: { kind: "Deployment", name: "nginx" }, image: "nginx:1.27" },
    });
    const alert = pipeline.handle(makeEvent(1), source) as Alert;
    // What goes on the wire has Alertmanager's published shape.
    assertShape(
      PostableAlertsSchema,
      JSON.parse(alertmanagerBody(JSON.stringify(alert))),
      "the postable alerts",
    );
    expect(await pipeline.drain(15_000)).toBe(true);
    await pipeline.close();
    expect(logs.filter((l) => l.level === "error")).toEqual([]);
    expect(await counterValue(metrics.alertsDelivered)).toBe(1);

    const listed = (await (await fetch(`${base}/api/v2/alerts`)).json()) as GettableAlert[];
    const mine = listed.filter((a) => a.labels.trap === "trap-am-1");
    expect(mine).toHaveLength(1);
    const [got] = mine as [GettableAlert];
    expect(got.labels).toEqual({
      alertname: ALERTNAME,
      severity: "critical",
      cluster: "prod-eu-1",
      namespace: "default",
      pod: "nginx-7d9c",
      container: "nginx",
      trap: "trap-am-1",
      policy: "shadow-watch",
      policy_namespace: "security",
      team: "payments",
      // Kubernetes label names as Prometheus label names.
      example_com_owner: "sec-ops",
    });
    expect(got.annotations.summary).toBe(
      "read/open of /etc/shadow by /usr/bin/cat (pid 4001, uid 0) in default/nginx-7d9c, container nginx",
    );
    expect(got.annotations).toMatchObject({
      alert_id: alert.id,
      workload: "Deployment/nginx",
      image: "nginx:1.27",
    });
    expect(Date.parse(got.startsAt)).toBe(Date.parse(alert.timestamp));
    expect(got.status.state).toBe("active");
  }, 30_000);
});
