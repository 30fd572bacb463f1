import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ALLOW_MISS_REASONS, EXE_LAYERS } from "../../api/alert.ts";
import { ACCESS_KINDS } from "../../api/meta.ts";
import {
  assertValidAlert,
  imageFile,
  imageProcess,
  KERNEL_ID,
  makeEvent,
  makeSource,
} from "../../test/alerts/fixtures.ts";
import { LOADER_ENV_VARS } from "../kernel/contract.ts";
import { alertSourceFromHiveData } from "./alert-source.ts";
import { createBootClock } from "./boot-clock.ts";
import { buildAlert } from "./build-alert.ts";

const context = { clock: createBootClock(1_700_000_000_000_000_000n) };

describe("alert builder", () => {
  it("fills the reference fields and Hive's additions from the event and the watched file", () => {
    const event = makeEvent(1, { comm: "cat\0\0\0\0", ktimeNs: 5_000_000_000n, mask: 0x24, count: 3 });
    const ancestors = [
      { pid: 2_000, exe: { exe: "/usr/sbin/sshd", source: "seed" as const } },
      { pid: 1_000, exe: { source: "unknown" as const } },
    ];
    const alert = buildAlert(
      event,
      makeSource("t-1", "http://x/"),
      { ...context, ancestors: () => ancestors },
      4,
    );
    assertValidAlert(alert);
    expect(alert).toMatchObject({
      timestamp: "2023-11-14T22:13:25.000000Z",
      hive_policy_name: "shadow-watch",
      hive_policy_namespace: "security",
      trap_id: "t-1",
      metadata: {
        path: "/etc/shadow",
        inode: 131073,
        device: "259:1",
        mask: 0x24,
        accesses: ["read", "open"],
        count: 3,
        kernel_id: KERNEL_ID,
      },
      pod: {
        name: "nginx-7d9c",
        namespace: "default",
        container: { id: "containerd://4f1c2e", name: "nginx" },
      },
      node: { name: "node-a" },
      process: {
        pid: 4001,
        tgid: 4001,
        ppid: 3000,
        ns_pid: 7,
        uid: 0,
        gid: 0,
        comm: "cat",
        exe: "/usr/bin/cat",
        exe_source: "exec",
        exec_time: "2023-11-14T22:13:20.000001Z",
        parent: { pid: 3000, comm: "sh", exe: "/bin/sh", exe_source: "exec" },
        ancestors: [
          { pid: 2000, exe: "/usr/sbin/sshd", exe_source: "seed" },
          { pid: 1000, exe_source: "unknown" },
        ],
        cgroup_id: 9876,
      },
      suppressed: 4,
    });
  });

  it("says so when the kernel did not know the executable, and marks a truncated path", () => {
    const unknown = buildAlert(
      makeEvent(3, { process: { exe: { source: "unknown" }, execNs: 0n } }),
      makeSource("t-3"),
      context,
    );
    assertValidAlert(unknown);
    expect(unknown.process).toMatchObject({ exe_source: "unknown" });
    expect(unknown.process).not.toHaveProperty("exe");
    expect(unknown.process).not.toHaveProperty("exec_time");

    const long = buildAlert(
      makeEvent(4, { process: { exe: { exe: "/deep/bin/x", source: "exec", truncated: true }, execNs: 9n } }),
      makeSource("t-4"),
      context,
    );
    assertValidAlert(long);
    expect(long.process).toMatchObject({ exe: "/deep/bin/x", exe_source: "exec", exe_truncated: true });
  });

  it("shows which file ran, what else may run in it, and why the allow list did not hold", () => {
    const process = imageProcess("/usr/sbin/sshd", "/usr/sbin/cron");
    process.provenance = {
      file: { major: 0, minor: 40, ino: (1n << 63n) + 5n },
      layer: "container",
      loaderEnv: ["LD_PRELOAD", "LD_AUDIT"],
      envUnread: true,
      traced: true,
      forkUnseen: true,
    };
    process.chroot = true;
    if (!process.parent?.provenance) throw new Error("an image process has a parent");
    process.parent.provenance.layer = "unlinked";
    process.parent.chroot = true;
    process.parent.execedSinceFork = true;
    process.parent.reparented = true;
    const misses = [
      { entry: 0, field: "exe" as const, reason: "written-in-container" as const },
      { entry: 1, field: "parent-exe" as const, reason: "reparented" as const },
      { entry: 2, field: "accesses" as const, reason: "accesses" as const },
    ];
    const alert = buildAlert(makeEvent(5, { process }), makeSource("t-5"), context, 0, misses);
    assertValidAlert(alert);
    expect(alert.process).toMatchObject({
      exe: "/usr/sbin/sshd",
      exe_source: "exec",
      exe_file: { layer: "container", device: "0:40", inode: "9223372036854775813" },
      exe_loader_env: ["LD_PRELOAD", "LD_AUDIT"],
      exe_env_unread: true,
      traced: true,
      chroot: true,
      parent: {
        exe: "/usr/sbin/cron",
        exe_file: { layer: "unlinked", device: "0:40", inode: imageFile("/usr/sbin/cron").ino.toString() },
        chroot: true,
        exec_since_fork: true,
        reparented: true,
      },
    });
    expect(alert.allow_misses).toEqual(misses);
    // The alert carries the misses as given, not the caller's objects.
    expect(alert.allow_misses?.[0]).not.toBe(misses[0]);
  });

  it("leaves out what the kernel did not record, what holds and what no allow list asked", () => {
    const honest = buildAlert(
      makeEvent(6, { process: imageProcess("/usr/sbin/sshd") }),
      makeSource("t-6"),
      context,
      0,
      [],
    );
    assertValidAlert(honest);
    // An image's file run honestly: only the file, nothing flagged.
    expect(honest.process.exe_file).toEqual({
      layer: "image",
      device: "0:40",
      inode: imageFile("/usr/sbin/sshd").ino.toString(),
    });
    const flags = ["exe_loader_env", "exe_env_unread", "traced", "chroot"];
    for (const key of flags) {
      expect(honest.process).not.toHaveProperty(key);
      expect(honest.process.parent).not.toHaveProperty(key);
    }
    expect(honest.process.parent).not.toHaveProperty("exec_since_fork");
    expect(honest.process.parent).not.toHaveProperty("reparented");
    expect(honest).not.toHaveProperty("allow_misses");

    // No provenance recorded (an event from a program that does not record it), no allow list.
    const unrecorded = buildAlert(makeEvent(7), makeSource("t-7"), context);
    assertValidAlert(unrecorded);
    for (const key of ["exe_file", ...flags]) {
      expect(unrecorded.process).not.toHaveProperty(key);
      expect(unrecorded.process.parent).not.toHaveProperty(key);
    }
    expect(unrecorded).not.toHaveProperty("allow_misses");

    // A provenance whose file the kernel did not know (inode 0) shows no file.
    const noFile = imageProcess("/usr/sbin/sshd");
    if (noFile.provenance) noFile.provenance.file = { major: 0, minor: 0, ino: 0n };
    const unknownFile = buildAlert(makeEvent(8, { process: noFile }), makeSource("t-8"), context);
    assertValidAlert(unknownFile);
    expect(unknownFile.process).not.toHaveProperty("exe_file");
  });

  it("leaves out the pod for a host path (standalone mode) and stays schema-valid", () => {
    const source = makeSource("t-2");
    source.annotations = { path: "/etc/passwd", hive_policy_name: "host" };
    const alert = buildAlert(makeEvent(2), source, context);
    assertValidAlert(alert);
    expect(alert.pod).toBeUndefined();
    expect(alert.suppressed).toBeUndefined();
    expect(alert.process.exe).toBe("/usr/bin/cat");
  });

  it("reports an inode number beyond 2^53 exactly (overlayfs xino sets the top bits)", () => {
    const ino = (1n << 63n) + 5n;
    const event = makeEvent(3);
    const alert = buildAlert({ ...event, key: { ...event.key, ino } }, makeSource("t-3"), context);
    assertValidAlert(alert);
    expect(alert.metadata.inode).toBe("9223372036854775813");
  });

  it("says whether a denying trap's access was refused, would have been, or was not armed to be", () => {
    const deny = { ...makeSource("t-deny", "http://x/"), deny: "deny" as const };
    const refused = buildAlert(makeEvent(1, { deny: "denied" }), deny, context, 0);
    assertValidAlert(refused);
    expect(refused).toMatchObject({ denied: true, deny_reason: "denied" });
    // The kernel had no deny for it (a layer's file before the container's own was armed).
    expect(buildAlert(makeEvent(1), deny, context, 0)).toMatchObject({
      denied: false,
      deny_reason: "not-armed",
    });
    const dry = buildAlert(makeEvent(1, { deny: "dryRun" }), { ...deny, deny: "dryRun" }, context, 0);
    expect(dry).toMatchObject({ denied: false, deny_reason: "dry-run" });
    // A trap that only alerts says nothing of denying.
    const plain = buildAlert(makeEvent(1), makeSource("t-1", "http://x/"), context, 0);
    expect(plain.denied).toBeUndefined();
    expect(plain.deny_reason).toBeUndefined();
  });

  it("gives every alert its own id", () => {
    const ids = new Set(
      Array.from({ length: 100 }, (_, i) => buildAlert(makeEvent(i), makeSource("t"), context).id),
    );
    expect(ids.size).toBe(100);
  });
});

describe("alert source from a HiveData", () => {
  it("takes callback, allow list, policy and path from the live trap, the pod from the HiveData", () => {
    const trap = {
      path: "/etc/shadow",
      callback: "https://alerts.security/",
      allow: [{ exe: "/usr/sbin/sshd" }],
    };
    const live = { trapId: "t-9", policy: { namespace: "security", name: "shadow-watch" }, trap };
    const source = alertSourceFromHiveData(
      {
        metadata: {
          name: "d-1",
          namespace: "hive-system",
          // Written by whoever could write the HiveData: none of these may steer the alert.
          labels: { "trap-id": "t-9", "hive-operator.com/policy-namespace": "hive-system" },
          annotations: {
            callback: "https://attacker.example/",
            hive_policy_name: "other",
            path: "/etc/hostname",
            pod_name: "p",
            pod_uid: "uid-123",
            namespace: "default",
          },
        },
        spec: {
          "inode-no": 5,
          "kernel-id": KERNEL_ID,
          device: { major: 8, minor: 1 },
          accesses: ["read"],
          allow: [{ exe: "/usr/bin/cat" }],
        } as never,
      },
      live,
      { nodeName: "node-a" },
    );
    expect(source).toMatchObject({
      callback: "https://alerts.security/",
      allow: [{ exe: "/usr/sbin/sshd" }],
      policyNamespace: "security",
      annotations: { hive_policy_name: "shadow-watch", path: "/etc/shadow" },
      podUid: "uid-123",
      kernelId: KERNEL_ID,
      nodeName: "node-a",
    });
    expect("callback" in source.annotations).toBe(false);
    const alert = buildAlert(makeEvent(1), source, context);
    assertValidAlert(alert);
    expect(alert).toMatchObject({
      trap_id: "t-9",
      hive_policy_namespace: "security",
      pod: { name: "p", namespace: "default" },
    });
  });

  it("carries the trap's severity and labels, the cluster's name and the pod's labels, workload and image", () => {
    const data = {
      metadata: {
        name: "d-2",
        labels: { "trap-id": "t-7" },
        annotations: {
          pod_name: "web-7d9c-x",
          namespace: "shop",
          container_name: "app",
          container_id: "c://1",
        },
      },
      spec: {
        "inode-no": "5",
        "kernel-id": KERNEL_ID,
        device: { major: 8, minor: 1 },
        accesses: ["read" as const],
        pod: {
          labels: { app: "web", "pod-template-hash": "7d9c" },
          workload: { kind: "Deployment", name: "web" },
          image: "registry.example.com/shop/web:1.4.2",
        },
      },
    };
    const trap = { path: "/etc/shadow", severity: "critical" as const, labels: { team: "payments" } };
    const live = { trapId: "t-7", policy: { namespace: "shop", name: "secrets" }, trap };
    const alert = buildAlert(
      makeEvent(1),
      alertSourceFromHiveData(data, live, { nodeName: "node-b", clusterName: "prod-eu-1" }),
      context,
    );
    assertValidAlert(alert);
    expect(alert).toMatchObject({
      severity: "critical",
      labels: { team: "payments" },
      cluster: { name: "prod-eu-1" },
      pod: {
        name: "web-7d9c-x",
        namespace: "shop",
        container: { id: "c://1", name: "app", image: "registry.example.com/shop/web:1.4.2" },
        labels: { app: "web", "pod-template-hash": "7d9c" },
        workload: { kind: "Deployment", name: "web" },
      },
    });
    // Without them: the default severity, and nothing invented.
    const plain = buildAlert(
      makeEvent(2),
      alertSourceFromHiveData(
        { ...data, spec: { ...data.spec, pod: undefined } },
        { ...live, trap: { path: "/etc/shadow" } },
        { nodeName: "node-b" },
      ),
      context,
    );
    assertValidAlert(plain);
    expect(plain.severity).toBe("warning");
    expect(plain.labels).toBeUndefined();
    expect(plain.cluster).toBeUndefined();
    expect(plain.pod).toEqual({
      name: "web-7d9c-x",
      namespace: "shop",
      container: { id: "c://1", name: "app" },
    });
  });
});

describe("alert builder on arbitrary kernel input", () => {
  it("always yields a schema-valid alert, whatever the event's numbers and the process's name", () => {
    const u32 = fc.integer({ min: 0, max: 0xffffffff });
    const provenance = fc.record({
      file: fc.record({
        major: fc.integer({ min: 0, max: 4095 }),
        minor: fc.integer({ min: 0, max: 1048575 }),
        ino: fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
      }),
      layer: fc.constantFrom(...EXE_LAYERS),
      loaderEnv: fc.subarray([...LOADER_ENV_VARS]),
      envUnread: fc.boolean(),
      traced: fc.boolean(),
      forkUnseen: fc.boolean(),
    });
    const misses = fc.array(
      fc.record({
        entry: fc.nat(),
        field: fc.constantFrom("exe" as const, "parent-exe" as const, "accesses" as const),
        reason: fc.constantFrom(...ALLOW_MISS_REASONS),
      }),
      { maxLength: 4 },
    );
    const event = fc.record({
      ktimeNs: fc.bigInt({ min: 0n, max: 2n ** 63n - 1n }),
      key: fc.record({
        major: fc.integer({ min: 0, max: 4095 }),
        minor: fc.integer({ min: 0, max: 1048575 }),
        ino: fc.bigInt({ min: 1n, max: 2n ** 64n - 1n }),
      }),
      mask: u32,
      accesses: fc.subarray([...ACCESS_KINDS]),
      kind: fc.constantFrom("file" as const, "parent" as const),
      slot: u32,
      pid: u32,
      tgid: u32,
      uid: u32,
      gid: u32,
      comm: fc.string({ maxLength: 16, unit: "binary" }),
      cgroupId: fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
      count: u32,
      process: fc.record({
        exe: fc.record({
          exe: fc.string({ maxLength: 255, unit: "binary" }),
          source: fc.constantFrom("exec" as const, "seed" as const, "unknown" as const),
        }),
        provenance: fc.option(provenance, { nil: undefined }),
        chroot: fc.option(fc.boolean(), { nil: undefined }),
        execNs: fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
        ppid: u32,
        parent: fc.record({
          pid: u32,
          comm: fc.string({ maxLength: 16, unit: "binary" }),
          exe: fc.record({ source: fc.constantFrom("exec" as const, "unknown" as const) }),
          provenance: fc.option(provenance, { nil: undefined }),
          chroot: fc.option(fc.boolean(), { nil: undefined }),
          execedSinceFork: fc.option(fc.boolean(), { nil: undefined }),
          reparented: fc.option(fc.boolean(), { nil: undefined }),
        }),
      }),
    });
    const clock = createBootClock();
    fc.assert(
      fc.property(event, misses, (e, m) => {
        const alert = buildAlert(e, makeSource("t"), { clock }, 0, m);
        assertValidAlert(alert);
        expect(alert.process.comm.length).toBeLessThanOrEqual(15);
      }),
      { numRuns: 300 },
    );
  });
});
