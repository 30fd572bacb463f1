/**
 * Allowlists and per-executable rate limiting in the alert pipeline, delivered to a real
 * HTTP receiver on 127.0.0.1: an allowed access raises no alert (no line, no POST) and is
 * counted; a reader hammering a trap from one container never hides another executable's
 * access. Events are synthetic KernelEvents carrying what the kernel recorded at the access.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { Alert } from "../../api/alert.ts";
import { trapId } from "../../api/ids.ts";
import type { AllowEntry, HivePolicy } from "../../api/policy.ts";
import { alertSourceFromHiveData } from "../../runtime/alerts/alert-source.ts";
import { type AlertPipelineConfig, createAlertPipeline } from "../../runtime/alerts/pipeline.ts";
import { buildHiveData } from "../../runtime/controllers/hive-data.ts";
import { indexLiveTraps } from "../../runtime/controllers/live-traps.ts";
import type { ExecIdentity, KernelEvent, ProcessIdentity } from "../../runtime/kernel/contract.ts";
import { createHiveMetrics, type HiveMetrics } from "../../runtime/metrics/metrics.ts";
import { assertValidAlert, captureLogger, counterValue, makeEvent, makeSource } from "./fixtures.ts";
import { type Receiver, startReceiver } from "./receiver.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const exec = (exe: string): ExecIdentity => ({ exe, source: "exec" });

/** A synthetic event as the kernel reports it: `exe` run by `parent`. */
function access(
  n: number,
  exe: ExecIdentity,
  parent: ExecIdentity = exec("/bin/sh"),
  overrides: Partial<KernelEvent> = {},
): KernelEvent {
  const process: ProcessIdentity = { exe, execNs: 0n, ppid: 1, parent: { pid: 1, exe: parent } };
  return makeEvent(n, { process, ...overrides });
}

async function setup(options: Partial<AlertPipelineConfig> = {}): Promise<{
  handle: (event: KernelEvent, allow?: AllowEntry[], container?: string) => Alert | undefined;
  receiver: Receiver;
  metrics: HiveMetrics;
  lines: string[];
  drain: () => Promise<boolean>;
}> {
  const receiver = await startReceiver();
  cleanups.push(() => receiver.close());
  const metrics = createHiveMetrics({ processMetrics: false });
  const lines: string[] = [];
  const pipeline = await createAlertPipeline({
    logger: captureLogger().logger,
    metrics,
    lines: (l) => lines.push(l),
    delivery: { backoffBaseMs: 20, backoffMaxMs: 200 },
    ...options,
  });
  cleanups.push(() => pipeline.close());
  const handle = (event: KernelEvent, allow?: AllowEntry[], container = "containerd://aaa") => {
    const source = makeSource("shadow-trap", receiver.url);
    source.annotations.container_id = container;
    if (allow) source.allow = allow;
    return pipeline.handle(event, source);
  };
  return { handle, receiver, metrics, lines, drain: () => pipeline.drain(5_000) };
}

const SHADOW_ALLOW: AllowEntry[] = [
  { exe: "/usr/sbin/sshd" },
  { exe: "/usr/sbin/unix_chkpwd" },
  { exe: "/usr/bin/passwd", accesses: ["read", "write"] },
  { "parent-exe": "/usr/sbin/cron" },
];

describe("allowlists in the alert pipeline", () => {
  it("raises no alert and posts nothing for an allowed executable, and counts it by trap and entry", async () => {
    const { handle, receiver, metrics, lines, drain } = await setup();
    expect(handle(access(1, exec("/usr/sbin/sshd")), SHADOW_ALLOW)).toBeUndefined();
    expect(handle(access(2, exec("/usr/bin/vim"), exec("/usr/sbin/cron")), SHADOW_ALLOW)).toBeUndefined();
    expect(handle(access(3, exec("/usr/sbin/sshd")), SHADOW_ALLOW)).toBeUndefined();
    const alert = handle(access(4, exec("/usr/bin/cat")), SHADOW_ALLOW);
    expect(alert?.process.comm).toBe("cat");
    expect(await drain()).toBe(true);
    expect(lines).toHaveLength(1);
    expect(receiver.accepted.map((r) => (JSON.parse(r.body) as Alert).id)).toEqual([alert?.id]);
    assertValidAlert(JSON.parse(receiver.accepted[0]?.body ?? "{}"));
    const labels = { policy_namespace: "security", policy: "shadow-watch", trap_id: "shadow-trap" };
    expect(await counterValue(metrics.allowedAccesses, { ...labels, entry: "0" })).toBe(2);
    expect(await counterValue(metrics.allowedAccesses, { ...labels, entry: "3" })).toBe(1);
    expect(await counterValue(metrics.allowedAccesses)).toBe(3);
    expect(await counterValue(metrics.alerts)).toBe(1);
  });

  it("alerts a copy of an allowed binary elsewhere, and a process the kernel did not know", async () => {
    const { handle, lines } = await setup();
    const allow: AllowEntry[] = [{ exe: "/usr/sbin/sshd" }, { exe: "/usr/lib/openssh/*" }];
    expect(handle(access(1, exec("/tmp/sshd")), allow)).toBeDefined();
    expect(handle(access(2, { source: "unknown" }), allow)).toBeDefined();
    expect(
      handle(access(3, { exe: "/usr/sbin/sshd", source: "exec", truncated: true }), allow),
    ).toBeDefined();
    expect(handle(access(4, exec("/usr/lib/openssh/sftp-server")), allow)).toBeUndefined();
    expect(lines).toHaveLength(3);
  });

  it("allows an entry with accesses only for accesses within them", async () => {
    const { handle } = await setup();
    const passwd = exec("/usr/bin/passwd");
    expect(handle(access(1, passwd, undefined, { accesses: ["read"] }), SHADOW_ALLOW)).toBeUndefined();
    expect(
      handle(access(2, passwd, undefined, { accesses: ["read", "write"] }), SHADOW_ALLOW),
    ).toBeUndefined();
    expect(handle(access(3, passwd, undefined, { accesses: ["exec"] }), SHADOW_ALLOW)).toBeDefined();
    expect(handle(access(4, passwd, undefined, { accesses: ["read", "open"] }), SHADOW_ALLOW)).toBeDefined();
  });

  it("decides with the allow list of the live trap the HiveData names (none is copied into it)", async () => {
    const { receiver, metrics, lines } = await setup();
    const pipeline = await createAlertPipeline({
      logger: captureLogger().logger,
      metrics,
      lines: (l) => lines.push(l),
    });
    cleanups.push(() => pipeline.close());
    const trap = { path: "/etc/shadow", callback: receiver.url, allow: SHADOW_ALLOW };
    const id = trapId({ namespace: "security", name: "shadow-watch" }, trap);
    const policy: HivePolicy = {
      apiVersion: "hive-operator.com/v1alpha1",
      kind: "HivePolicy",
      metadata: { name: "shadow-watch", namespace: "security" },
      spec: { traps: [trap] },
    };
    const data = buildHiveData({
      policy,
      trap,
      trapId: id,
      pod: { metadata: { name: "web", namespace: "prod", uid: "u-1" } },
      container: { name: "app", containerId: "containerd://abc" },
      kernelId: "0d9f5c1e-3b7a-4c2e-9f1d-2a6b8c4e0f11",
      namespace: "hive-system",
      nodeName: "node-a",
      file: { major: 259, minor: 1, ino: 131_073n },
      parent: { major: 259, minor: 1, ino: 2n },
    });
    const live = indexLiveTraps([policy]).get(id);
    if (!live) throw new Error("the policy holds the trap");
    const source = alertSourceFromHiveData(data, live, { nodeName: "node-a" });
    expect(pipeline.handle(access(1, exec("/usr/sbin/unix_chkpwd")), source)).toBeUndefined();
    expect(pipeline.handle(access(2, exec("/usr/bin/su")), source)?.pod?.name).toBe("web");
    expect(lines).toHaveLength(1);
    expect(
      await counterValue(metrics.allowedAccesses, {
        policy_namespace: "security",
        policy: "shadow-watch",
        trap_id: id,
        entry: "1",
      }),
    ).toBe(1);
  });

  it("checks the allowlist before the rate limiter: allowed readers spend no alert budget", async () => {
    const { handle, metrics } = await setup({ rateLimit: { perSecond: 1, burst: 1, now: () => 0 } });
    for (let i = 0; i < 100; i++) handle(access(i, exec("/usr/sbin/sshd")), SHADOW_ALLOW);
    expect(await counterValue(metrics.alertsSuppressed)).toBe(0);
    const cat = handle(access(200, exec("/usr/bin/cat")), SHADOW_ALLOW);
    expect(cat?.suppressed).toBeUndefined();
    expect(await counterValue(metrics.allowedAccesses)).toBe(100);
  });
});

describe("rate limiting per trap × container × executable", () => {
  it("a decoy reading in a loop from one container hides no read by another executable", async () => {
    const now = 0;
    const { handle, receiver, drain } = await setup({
      rateLimit: { perSecond: 1, burst: 2, now: () => now },
    });
    const decoy = exec("/usr/bin/cat");
    const decoys = Array.from({ length: 500 }, (_, i) => handle(access(i, decoy)));
    expect(decoys.filter(Boolean)).toHaveLength(2);
    // Same trap, same container, same second: another executable's single read.
    const real = handle(access(1000, exec("/usr/bin/python3")));
    expect(real).toBeDefined();
    // The decoy's own image in another container is not hidden either.
    const other = handle(access(1001, decoy), undefined, "containerd://bbb");
    expect(other).toBeDefined();
    expect(await drain()).toBe(true);
    const ids = receiver.accepted.map((r) => (JSON.parse(r.body) as Alert).id);
    expect(ids).toContain(real?.id);
    expect(ids).toContain(other?.id);
  });

  it("keeps counting what it suppressed and reports it in the executable's next alert", async () => {
    let now = 0;
    const { handle } = await setup({ rateLimit: { perSecond: 1, burst: 2, now: () => now } });
    const decoy = exec("/usr/bin/cat");
    for (let i = 0; i < 10; i++) handle(access(i, decoy));
    now += 1000;
    expect(handle(access(11, decoy))?.suppressed).toBe(8);
  });
});
