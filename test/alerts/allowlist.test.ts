/**
 * Allowlists and per-executable rate limiting in the alert pipeline, delivered to a real
 * HTTP receiver on 127.0.0.1: an allowed access raises no alert (no line, no POST) and is
 * counted; a denied one says in its alert why each entry did not hold; a reader hammering a
 * trap from one container never hides another executable's access. Events are synthetic
 * KernelEvents carrying what the kernel recorded at the access, and the allow entries' exact
 * paths resolve to the image's files, as discover would find them in the container.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { Alert } from "../../api/alert.ts";
import { trapId } from "../../api/ids.ts";
import type { AllowEntry, HivePolicy } from "../../api/policy.ts";
import { alertSourceFromHiveData } from "../../runtime/alerts/alert-source.ts";
import { exactAllowPaths } from "../../runtime/alerts/allowlist.ts";
import { type AlertPipelineConfig, createAlertPipeline } from "../../runtime/alerts/pipeline.ts";
import { buildHiveData } from "../../runtime/controllers/hive-data.ts";
import { indexLiveTraps } from "../../runtime/controllers/live-traps.ts";
import type {
  ExecIdentity,
  ExecProvenance,
  KernelEvent,
  ProcessIdentity,
} from "../../runtime/kernel/contract.ts";
import { createHiveMetrics, type HiveMetrics } from "../../runtime/metrics/metrics.ts";
import {
  assertValidAlert,
  captureLogger,
  counterValue,
  imageFile,
  imageFiles,
  imageProcess,
  makeEvent,
  makeSource,
} from "./fixtures.ts";
import { type Receiver, startReceiver } from "./receiver.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** The image's `exe` forked by the image's `parent`, with `change` applied to the process's provenance. */
function image(exe: string, parent = "/bin/sh", change: Partial<ExecProvenance> = {}): ProcessIdentity {
  const process = imageProcess(exe, parent);
  if (process.provenance) Object.assign(process.provenance, change);
  return process;
}

/** An image process whose recorded identity is `identity` (unknown, seeded, truncated…). */
function identified(identity: ExecIdentity): ProcessIdentity {
  return { ...image(identity.exe ?? "/usr/bin/cat"), exe: identity };
}

/** A synthetic event as the kernel reports it: `process` accessed the trapped file. */
function access(n: number, process: ProcessIdentity, overrides: Partial<KernelEvent> = {}): KernelEvent {
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
    if (allow) {
      source.allow = allow;
      // What discover found at the entries' exact paths in the container: the image's files.
      source.allowFiles = imageFiles(exactAllowPaths({ allow }));
    }
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
    expect(handle(access(1, image("/usr/sbin/sshd")), SHADOW_ALLOW)).toBeUndefined();
    expect(handle(access(2, image("/usr/bin/vim", "/usr/sbin/cron")), SHADOW_ALLOW)).toBeUndefined();
    expect(handle(access(3, image("/usr/sbin/sshd")), SHADOW_ALLOW)).toBeUndefined();
    const alert = handle(access(4, image("/usr/bin/cat")), SHADOW_ALLOW);
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

  it("alerts a copy of an allowed binary elsewhere, a process the kernel did not know, and one it knew in part", async () => {
    const { handle, lines } = await setup();
    const allow: AllowEntry[] = [{ exe: "/usr/sbin/sshd" }, { exe: "/usr/lib/openssh/*" }];
    expect(handle(access(1, image("/tmp/sshd")), allow)).toBeDefined();
    expect(handle(access(2, identified({ source: "unknown" })), allow)).toBeDefined();
    expect(
      handle(access(3, identified({ exe: "/usr/sbin/sshd", source: "exec", truncated: true })), allow),
    ).toBeDefined();
    expect(handle(access(4, identified({ exe: "/usr/sbin/sshd", source: "seed" })), allow)).toBeDefined();
    expect(handle(access(5, image("/usr/lib/openssh/sftp-server")), allow)).toBeUndefined();
    expect(lines).toHaveLength(4);
  });

  it("alerts the allowed path when what ran there is not the image's file, run as the image shipped it", async () => {
    const { handle, lines } = await setup();
    const allow: AllowEntry[] = [{ exe: "/usr/sbin/sshd" }, { exe: "/usr/lib/openssh/*" }];
    const sshd = imageFile("/usr/sbin/sshd");
    const tampered: [Partial<ExecProvenance>, string][] = [
      [{ layer: "container" }, "written-in-container"],
      [{ layer: "unlinked" }, "unlinked"],
      [{ layer: "other" }, "not-from-image"],
      [{ file: { ...sshd, ino: sshd.ino + 1n } }, "not-the-image-file"],
      [{ loaderEnv: ["LD_PRELOAD"] }, "loader-env"],
      [{ envUnread: true }, "env-unread"],
      [{ traced: true }, "traced"],
    ];
    for (const [i, [change, reason]] of tampered.entries()) {
      const alert = handle(access(i, image("/usr/sbin/sshd", "/bin/sh", change)), allow);
      expect(alert?.allow_misses).toEqual([
        { entry: 0, field: "exe", reason },
        { entry: 1, field: "exe", reason: "other-executable" },
      ]);
    }
    const chrooted = image("/usr/sbin/sshd");
    chrooted.chroot = true;
    expect(handle(access(20, chrooted), allow)?.allow_misses?.[0]?.reason).toBe("chroot");
    // The same pattern on an image's file under the `*` prefix: only the provenance checks apply.
    const dropped = image("/usr/lib/openssh/sftp-server", "/bin/sh", { layer: "container" });
    expect(handle(access(21, dropped), allow)?.allow_misses?.[1]?.reason).toBe("written-in-container");
    expect(handle(access(22, image("/usr/sbin/sshd")), allow)).toBeUndefined();
    expect(lines).toHaveLength(tampered.length + 2);
  });

  it("says in the alert why each entry did not hold, and the alert matches the schema", async () => {
    const { handle, receiver, drain } = await setup();
    // An attacker's sshd, written in the container, preloading a library, run by a shell that
    // was orphaned and adopted by cron.
    const attacker = image("/usr/sbin/sshd", "/usr/sbin/cron", {
      layer: "container",
      loaderEnv: ["LD_PRELOAD"],
    });
    if (attacker.parent) attacker.parent.reparented = true;
    const alert = handle(access(1, attacker), SHADOW_ALLOW);
    expect(alert?.allow_misses).toEqual([
      { entry: 0, field: "exe", reason: "written-in-container" },
      { entry: 1, field: "exe", reason: "other-executable" },
      { entry: 2, field: "exe", reason: "other-executable" },
      { entry: 3, field: "parent-exe", reason: "reparented" },
    ]);
    expect(alert?.process).toMatchObject({
      exe: "/usr/sbin/sshd",
      exe_file: { layer: "container", device: "0:40", inode: imageFile("/usr/sbin/sshd").ino.toString() },
      exe_loader_env: ["LD_PRELOAD"],
      parent: { exe: "/usr/sbin/cron", reparented: true, exe_file: { layer: "image" } },
    });
    expect(await drain()).toBe(true);
    const posted = JSON.parse(receiver.accepted[0]?.body ?? "{}") as Alert;
    assertValidAlert(posted);
    expect(posted.allow_misses).toEqual(alert?.allow_misses);
    // A trap without an allow list has nothing to explain.
    const plain = handle(access(2, image("/usr/bin/cat")));
    expect(plain).toBeDefined();
    expect(plain).not.toHaveProperty("allow_misses");
  });

  it("allows an entry with accesses only for accesses within them", async () => {
    const { handle } = await setup();
    const passwd = () => image("/usr/bin/passwd");
    expect(handle(access(1, passwd(), { accesses: ["read"] }), SHADOW_ALLOW)).toBeUndefined();
    expect(handle(access(2, passwd(), { accesses: ["read", "write"] }), SHADOW_ALLOW)).toBeUndefined();
    expect(handle(access(3, passwd(), { accesses: ["exec"] }), SHADOW_ALLOW)).toBeDefined();
    const openRead = handle(access(4, passwd(), { accesses: ["read", "open"] }), SHADOW_ALLOW);
    expect(openRead?.allow_misses?.[2]).toEqual({ entry: 2, field: "accesses", reason: "accesses" });
  });

  it("decides with the allow list of the live trap the HiveData names, on the files the HiveData found", async () => {
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
    // Discover found unix_chkpwd in the container, and nothing at the other entries' paths.
    const chkpwd = imageFile("/usr/sbin/unix_chkpwd");
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
      executables: [
        {
          path: "/usr/sbin/unix_chkpwd",
          "inode-no": chkpwd.ino.toString(),
          device: { major: chkpwd.major, minor: chkpwd.minor },
        },
      ],
    });
    const live = indexLiveTraps([policy]).get(id);
    if (!live) throw new Error("the policy holds the trap");
    const source = alertSourceFromHiveData(data, live, { nodeName: "node-a" });
    expect(pipeline.handle(access(1, image("/usr/sbin/unix_chkpwd")), source)).toBeUndefined();
    expect(pipeline.handle(access(2, image("/usr/bin/su")), source)?.pod?.name).toBe("web");
    // Another file at the path discover resolved; a path discover did not resolve.
    const swapped = image("/usr/sbin/unix_chkpwd", "/bin/sh", { file: { ...chkpwd, ino: 9n } });
    expect(pipeline.handle(access(3, swapped), source)?.allow_misses?.[1]?.reason).toBe("not-the-image-file");
    expect(pipeline.handle(access(4, image("/usr/sbin/sshd")), source)?.allow_misses?.[0]?.reason).toBe(
      "not-resolved",
    );
    expect(lines).toHaveLength(3);
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
    for (let i = 0; i < 100; i++) handle(access(i, image("/usr/sbin/sshd")), SHADOW_ALLOW);
    expect(await counterValue(metrics.alertsSuppressed)).toBe(0);
    const cat = handle(access(200, image("/usr/bin/cat")), SHADOW_ALLOW);
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
    const decoy = image("/usr/bin/cat");
    const decoys = Array.from({ length: 500 }, (_, i) => handle(access(i, decoy)));
    expect(decoys.filter(Boolean)).toHaveLength(2);
    // Same trap, same container, same second: another executable's single read.
    const real = handle(access(1000, image("/usr/bin/python3")));
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
    const decoy = image("/usr/bin/cat");
    for (let i = 0; i < 10; i++) handle(access(i, decoy));
    now += 1000;
    expect(handle(access(11, decoy))?.suppressed).toBe(8);
  });
});
