/**
 * Kernel cases for allow lists that hold against the attacker they exist for: real containers
 * (containerd, overlayfs snapshot of an imported image: test/fixtures/image-containers.ts), a
 * trap that allows the image's `/usr/sbin/sshd` and `/usr/bin/head` and children of the image's
 * `/usr/sbin/cron`, and what a root process inside the container would try instead (including
 * writing an allowed process's memory with process_vm_writev or through /proc/PID/mem). The kernel
 * decides the allow list (bpf/allow.bpf.h, its rules made as the loader makes them:
 * runtime/alerts/allow-rules.ts): an allowed access is counted there and never an event; what it
 * does not allow reaches the real alert pipeline, which says why. The allowed files are found in
 * the container as discover finds them (safe walk, kernel proof).
 */
import assert from "node:assert/strict";
import type { Alert } from "../../../api/alert.ts";
import type { AllowEntry } from "../../../api/policy.ts";
import { allowFlagOf, allowRulesFor } from "../../../runtime/alerts/allow-rules.ts";
import type { AllowFiles } from "../../../runtime/alerts/allowlist.ts";
import { openContainerProcess } from "../../../runtime/discover/container-process.ts";
import { resolveInProcessRoot } from "../../../runtime/discover/file-resolver.ts";
import type { FileKey, KernelEvent } from "../../../runtime/kernel/contract.ts";
import { proveWith } from "../../../runtime/kernel/trap-proof.ts";
import { sleep } from "../../alerts/fixtures.ts";
import { ALLOW_IMAGE_REF } from "../../fixtures/allow-image.ts";
import { type ImageContainerd, startImageContainerd } from "../../fixtures/image-containers.ts";
import type { KernelCaseName } from "./case-names.ts";
import { type GuestHarness, pipelineFor } from "./process-cases.ts";

type AllowCaseName = Extract<
  KernelCaseName,
  | "allow in a container: the kernel lets the image's sshd, head and a child of the image's cron through without an event, sshd in a tight loop too; a binary written over sshd, sshd in a chroot, LD_PRELOAD, a parent that exec'd cron, an orphan adopted by cron and sshd whose memory another process wrote alert, each with its reason"
  | "allow in a container: an executable run from a memfd or from a deleted file alerts, its provenance shown"
>;

const ALLOW: AllowEntry[] = [
  { exe: "/usr/sbin/sshd" },
  { exe: "/usr/bin/head" },
  { "parent-exe": "/usr/sbin/cron" },
];
const CTR = "hive-allow";

/** One container of the allow image, its trap and the files its allow entries name. */
interface Scene {
  cd: ImageContainerd;
  run: (args: string[], opts?: { env?: string[]; afterMs?: number }) => Promise<KernelEvent[]>;
  pipeline: Awaited<ReturnType<typeof pipelineFor>>;
}

const containerPipeline = (files: AllowFiles) => pipelineFor(ALLOW, { files });

export function allowCases(h: GuestHarness): Record<AllowCaseName, () => Promise<Record<string, unknown>>> {
  const archive = process.env.HIVE_ALLOW_IMAGE ?? "";
  let execs = 0;

  /** What the kernel allowed since the last call, by entry, for `slot`. */
  const takeAllowed = (slot: number): number[] => {
    const taken = (h.watcher().takeAllowed?.() ?? []).filter((t) => t.slot === slot);
    return ALLOW.map((_, i) => taken.reduce((sum, t) => sum + Number(t.counts[i] ?? 0n), 0));
  };

  async function withScene<T>(slot: number, body: (scene: Scene) => Promise<T>): Promise<T> {
    assert.ok(
      archive,
      "HIVE_ALLOW_IMAGE (the allow image's OCI archive, built by the host suite) is not set",
    );
    const cd = await startImageContainerd(`/tmp/hive-allow-ctd-${slot}`);
    let pipeline: Awaited<ReturnType<typeof pipelineFor>> | undefined;
    try {
      cd.importImage(archive);
      const pid = cd.run(CTR, ALLOW_IMAGE_REF, ["/usr/sbin/cron", "-c", "while :; do sleep 1; done"]);
      // As discover does: the container's process held and checked, paths walked in its root, proven.
      const held = openContainerProcess("/proc", pid, CTR);
      const prove = proveWith(h.watcher().proofMaps());
      const find = (path: string) => resolveInProcessRoot(held, path, {}, prove).key;
      const files = new Map<string, FileKey[]>();
      try {
        for (const path of ["/usr/sbin/sshd", "/usr/bin/head", "/usr/sbin/cron"])
          files.set(path, [find(path)]);
        // As the loader writes them: the trap's allow rules, then the entry that names their slot.
        const rules = allowRulesFor(slot, ALLOW, { files });
        const allow = allowFlagOf(rules);
        h.watcher().sync(
          [
            {
              key: find("/etc/secret"),
              slot,
              accesses: ["read", "open"],
              kind: "file",
              ...(allow ? { allow } : {}),
            },
          ],
          rules,
        );
      } finally {
        held.close();
      }
      pipeline = await containerPipeline(files);
      const run = async (args: string[], opts: { env?: string[]; afterMs?: number } = {}) => {
        const seen = await h.observe(async () => {
          const r = cd.exec(CTR, `x${++execs}`, args, opts.env ? { env: opts.env } : {});
          assert.equal(r.status, 0, `${args.join(" ")} failed in the container: ${r.stderr}`);
          if (opts.afterMs) await sleep(opts.afterMs);
        });
        return seen.filter((e) => e.slot === slot);
      };
      return await body({ cd, run, pipeline });
    } finally {
      await pipeline?.close();
      await cd.stop();
    }
  }

  /** The single alert `events` raised, and its miss for `entry`. */
  const alertOf = (scene: Scene, events: KernelEvent[], what: string) => {
    const raised = scene.pipeline.handle(events);
    assert.equal(raised.length, 1, `${what}: expected one alert, got ${JSON.stringify(raised)}`);
    return raised[0] as Alert;
  };
  const missOf = (alert: Alert, entry: number) => alert.allow_misses?.find((m) => m.entry === entry);

  return {
    async "allow in a container: the kernel lets the image's sshd, head and a child of the image's cron through without an event, sshd in a tight loop too; a binary written over sshd, sshd in a chroot, LD_PRELOAD, a parent that exec'd cron, an orphan adopted by cron and sshd whose memory another process wrote alert, each with its reason"() {
      return withScene(60, async (scene) => {
        const { run } = scene;
        // The image's own programs: let through by the kernel, counted there, never an event.
        takeAllowed(60);
        assert.deepEqual(await run(["/usr/sbin/sshd", "read", "/etc/secret"]), [], "the image's sshd");
        assert.deepEqual(await run(["/usr/bin/head", "-c1", "/etc/secret"]), [], "the image's head");
        assert.deepEqual(await run(["/usr/sbin/cron", "-c", "cat /etc/secret; true"]), [], "a child of cron");
        const allowed = takeAllowed(60);
        assert.ok(
          allowed.every((n) => n >= 1),
          `the kernel's counts by entry: ${JSON.stringify(allowed)}`,
        );
        // An allowed reader in a tight loop: no ring event at all, every check counted in the kernel.
        const before = h.watcher().counters();
        const loop = await run(["/usr/sbin/sshd", "alternate", "300", "/etc/secret", "/etc/secret"]);
        const after = h.watcher().counters();
        const looped = takeAllowed(60)[0] ?? 0;
        assert.deepEqual(loop, [], "sshd reading in a tight loop raised events");
        assert.ok(looped >= 100, `the kernel counted ${looped} allowed checks of the loop`);
        assert.equal(after.events - before.events, 0n, "events were put in the ring buffer during the loop");

        const outcome: Record<string, unknown> = { allowedByEntry: allowed, loopChecks: looped };
        const expectMiss = (what: string, alert: Alert, entry: number, reason: string) => {
          const miss = missOf(alert, entry);
          assert.equal(miss?.reason, reason, `${what}: ${JSON.stringify(alert.allow_misses)}`);
          outcome[what] = {
            exe: alert.process.exe,
            file: alert.process.exe_file,
            misses: alert.allow_misses,
          };
        };
        // The image's sshd (the same inode, hard-linked into /srv/jail) run with another root.
        const jailed = alertOf(
          scene,
          await run(["/usr/bin/hive-attacker", "chroot-read", "/etc", "/srv/jail", "secret"]),
          "sshd in a chroot",
        );
        assert.equal(jailed.process.exe, "/usr/sbin/sshd");
        assert.equal(jailed.process.chroot, true);
        expectMiss("sshd in a chroot", jailed, 0, "chroot");
        // LD_PRELOAD on the image's dynamically linked head.
        const preloaded = alertOf(
          scene,
          await run(["/usr/bin/head", "-c1", "/etc/secret"], {
            env: ["LD_PRELOAD=/lib/x86_64-linux-gnu/libc.so.6"],
          }),
          "LD_PRELOAD",
        );
        assert.deepEqual(preloaded.process.exe_loader_env, ["LD_PRELOAD"]);
        expectMiss("LD_PRELOAD", preloaded, 1, "loader-env");
        // A shell forks the reader, then becomes cron by exec: cron never spawned it.
        const execed = alertOf(
          scene,
          await run(
            [
              "/bin/sh",
              "-c",
              "/usr/bin/hive-attacker sleep-read 1500 /etc/secret & exec /usr/sbin/cron -c 'sleep 3'",
            ],
            { afterMs: 3000 },
          ),
          "parent exec'd cron",
        );
        assert.equal(execed.process.parent?.exe, "/usr/sbin/cron");
        expectMiss("parent exec'd cron", execed, 2, "parent-execed");
        // A reader orphaned to the container's pid 1, which is the image's cron.
        const orphan = alertOf(
          scene,
          await run(["/bin/sh", "-c", "/usr/bin/hive-attacker sleep-read 1500 /etc/secret & exit 0"], {
            afterMs: 3000,
          }),
          "orphan adopted by cron",
        );
        assert.equal(orphan.process.parent?.exe, "/usr/sbin/cron");
        expectMiss("orphan adopted by cron", orphan, 2, "reparented");
        // The image's sshd, whose memory another process wrote without attaching as its tracer.
        for (const via of ["vm", "mem"]) {
          const what = `sshd's memory written through ${via === "vm" ? "process_vm_writev" : "/proc/PID/mem"}`;
          const injected = alertOf(
            scene,
            await run([
              "/usr/bin/hive-attacker",
              "inject",
              via,
              "300",
              "/usr/sbin/sshd",
              "sleep-read",
              "1000",
              "/etc/secret",
            ]),
            what,
          );
          assert.equal(injected.process.exe, "/usr/sbin/sshd");
          assert.equal(injected.process.traced, true, what);
          expectMiss(what, injected, 0, "traced");
        }
        // Last: a binary written over /usr/sbin/sshd inside the container (its overlay copy).
        const written = alertOf(
          scene,
          await run([
            "/bin/sh",
            "-c",
            "cp /usr/bin/hive-attacker /usr/sbin/sshd && /usr/sbin/sshd read /etc/secret",
          ]),
          "binary written over sshd",
        );
        assert.equal(written.process.exe, "/usr/sbin/sshd");
        assert.equal(written.process.exe_file?.layer, "container");
        expectMiss("binary written over sshd", written, 0, "written-in-container");
        return outcome;
      });
    },

    async "allow in a container: an executable run from a memfd or from a deleted file alerts, its provenance shown"() {
      return withScene(61, async (scene) => {
        const { run } = scene;
        const memfd = alertOf(
          scene,
          await run([
            "/usr/bin/hive-attacker",
            "memfd-exec",
            "/usr/bin/hive-attacker",
            "read",
            "/etc/secret",
          ]),
          "memfd",
        );
        assert.equal(memfd.process.exe_file?.layer, "unlinked");
        const deleted = alertOf(
          scene,
          await run([
            "/bin/sh",
            "-c",
            "cp /usr/bin/hive-attacker /tmp/h && /tmp/h unlink-self-read 200 /etc/secret",
          ]),
          "deleted file",
        );
        assert.equal(deleted.process.exe_file?.layer, "unlinked");
        return { memfd: memfd.process, deleted: deleted.process };
      });
    },
  };
}
