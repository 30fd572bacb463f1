/**
 * Kernel case for traps that deny (bpf/hive.bpf.c hive_deny, runtime/kernel/deny-link.ts): real
 * containers of one image (containerd, overlayfs snapshots: test/fixtures/image-containers.ts),
 * each container's own /etc/secret found as discover finds it (safe walk, kernel proof). One
 * container's trap denies all but its allow list (the image's sshd and head, decided in the
 * kernel: bpf/allow.bpf.h), one's is a dry run, one has none; then the agent holding the deny is
 * SIGKILLed (deny-agent.ts), and the next agent lifts the deny when the trap is gone.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import type { Alert } from "../../../api/alert.ts";
import type { AllowEntry } from "../../../api/policy.ts";
import { allowFlagOf, allowRulesFor } from "../../../runtime/alerts/allow-rules.ts";
import { openContainerProcess } from "../../../runtime/discover/container-process.ts";
import { resolveInProcessRoot } from "../../../runtime/discover/file-resolver.ts";
import type { FileKey, KernelEvent, WatchEntry } from "../../../runtime/kernel/contract.ts";
import { DENY_LINK_PIN } from "../../../runtime/kernel/deny-link.ts";
import { proveWith } from "../../../runtime/kernel/trap-proof.ts";
import { ALLOW_IMAGE_REF } from "../../fixtures/allow-image.ts";
import { type ExecResult, startImageContainerd } from "../../fixtures/image-containers.ts";
import type { KernelCaseName } from "./case-names.ts";
import { type GuestHarness, pipelineFor } from "./process-cases.ts";

type DenyCaseName = Extract<
  KernelCaseName,
  "deny in a container: the image's sshd and head, its allow list, read; the trapped file is refused (EACCES) and alerted denied, by cat, by head under LD_PRELOAD, by sshd whose memory another process wrote, through a hard link in a chroot and by a binary written over sshd; a dry run reads and is alerted would-deny; another container of the image reads freely; the deny and its allow list hold while its agent is SIGKILLed and lift when the trap is gone"
>;

const DENIED = 80;
const DRY_RUN = 81;
const SECRET = "/etc/secret";
const ALLOW: AllowEntry[] = [{ exe: "/usr/sbin/sshd" }, { exe: "/usr/bin/head" }];

/** JSON of watch entries or allow rules, their bigint inodes as strings (deny-agent.ts reads them back). */
const toJson = (value: unknown) =>
  JSON.stringify(value, (_k, v: unknown) => (typeof v === "bigint" ? v.toString() : v));

export function denyCases(
  h: GuestHarness,
  pinRoot: string,
): Record<DenyCaseName, () => Promise<Record<string, unknown>>> {
  const archive = process.env.HIVE_ALLOW_IMAGE ?? "";
  let execs = 0;
  return {
    async "deny in a container: the image's sshd and head, its allow list, read; the trapped file is refused (EACCES) and alerted denied, by cat, by head under LD_PRELOAD, by sshd whose memory another process wrote, through a hard link in a chroot and by a binary written over sshd; a dry run reads and is alerted would-deny; another container of the image reads freely; the deny and its allow list hold while its agent is SIGKILLed and lift when the trap is gone"() {
      assert.ok(
        archive,
        "HIVE_ALLOW_IMAGE (the allow image's OCI archive, built by the host suite) is not set",
      );
      const cd = await startImageContainerd("/tmp/hive-deny-ctd");
      const files = new Map<string, FileKey[]>();
      let denying: Awaited<ReturnType<typeof pipelineFor>> | undefined;
      const dryRun = await pipelineFor([], { deny: "dryRun" });
      try {
        cd.importImage(archive);
        const prove = proveWith(h.watcher().proofMaps());
        const keys = new Map<string, FileKey>();
        for (const id of ["deny-a", "deny-b", "deny-c"]) {
          const pid = cd.run(id, ALLOW_IMAGE_REF, ["/usr/sbin/cron", "-c", "while :; do sleep 1; done"]);
          const held = openContainerProcess("/proc", pid, id);
          try {
            keys.set(id, resolveInProcessRoot(held, SECRET, {}, prove).key);
            // The allow list's files as discover finds them in the denying container.
            if (id === "deny-a")
              for (const path of ["/usr/sbin/sshd", "/usr/bin/head"])
                files.set(path, [resolveInProcessRoot(held, path, {}, prove).key]);
          } finally {
            held.close();
          }
        }
        denying = await pipelineFor(ALLOW, { deny: "deny", files });
        const rules = allowRulesFor(DENIED, ALLOW, { files });
        const allow = allowFlagOf(rules);
        const entry = (id: string, slot: number, deny: WatchEntry["deny"]): WatchEntry => ({
          key: keys.get(id) as FileKey,
          slot,
          accesses: ["read", "open"],
          kind: "file",
          ...(deny ? { deny } : {}),
          ...(slot === DENIED && allow ? { allow } : {}),
        });
        const entries = [entry("deny-a", DENIED, "deny"), entry("deny-b", DRY_RUN, "dryRun")];
        h.watcher().sync(entries, rules);
        const exec = (id: string, args: string[], env?: string[]): ExecResult =>
          cd.exec(id, `x${++execs}`, args, env ? { env } : {});
        /** Runs `args` in container `id`; its result and the events of `slot` it raised. */
        const observe = async (id: string, slot: number, args: string[], env?: string[]) => {
          let result: ExecResult = { status: -1, stdout: "", stderr: "" };
          const seen = await h.observe(() => {
            result = exec(id, args, env);
          });
          return { result, events: seen.filter((e: KernelEvent) => e.slot === slot) };
        };
        const refused = (what: string, r: { result: ExecResult; events: KernelEvent[] }): Alert => {
          assert.notEqual(r.result.status, 0, `${what} read the denied file: ${r.result.stdout}`);
          assert.match(r.result.stderr, /Permission denied/, `${what}: ${r.result.stderr}`);
          const raised = denying?.handle(r.events) ?? [];
          assert.equal(raised.length, 1, `${what}: ${JSON.stringify(raised)}`);
          const alert = raised[0] as Alert;
          assert.equal(alert.denied, true, `${what}: ${JSON.stringify(alert)}`);
          assert.equal(alert.deny_reason, "denied");
          return alert;
        };
        /** The allow list's programs: they read, and the kernel lets them through without an event. */
        const passes = async (what: string, args: string[]) => {
          const r = await observe("deny-a", DENIED, args);
          assert.equal(r.result.status, 0, `${what} was refused: ${r.result.stderr}`);
          assert.deepEqual(r.events, [], `${what} raised events`);
        };
        await passes("the image's sshd", ["/usr/sbin/sshd", "read", SECRET]);
        await passes("the image's head", ["/usr/bin/head", "-c1", SECRET]);
        const before = h.watcher().counters().denied;
        const cat = refused("cat", await observe("deny-a", DENIED, ["/bin/cat", SECRET]));
        const preloaded = refused(
          "head under LD_PRELOAD",
          await observe(
            "deny-a",
            DENIED,
            ["/usr/bin/head", "-c1", SECRET],
            ["LD_PRELOAD=/lib/x86_64-linux-gnu/libc.so.6"],
          ),
        );
        const jailed = refused(
          "a hard link in a chroot",
          await observe("deny-a", DENIED, [
            "/usr/bin/hive-attacker",
            "chroot-read",
            "/etc",
            "/srv/jail",
            "secret",
          ]),
        );
        assert.equal(jailed.process.chroot, true);
        const injected = refused(
          "sshd whose memory another process wrote",
          await observe("deny-a", DENIED, [
            "/usr/bin/hive-attacker",
            "inject",
            "vm",
            "300",
            "/usr/sbin/sshd",
            "sleep-read",
            "1000",
            SECRET,
          ]),
        );
        assert.equal(injected.process.traced, true);
        const deniedCount = h.watcher().counters().denied - before;
        assert.ok(deniedCount >= 4n, `the kernel counted ${deniedCount} denials`);
        // Denied through the BPF LSM where it is active (Debian's 6.1 and 6.12), else fmod_ret (5.10).
        const state = h.watcher().denyState();
        const expected = process.env.HIVE_VM_KERNEL === "5.10" ? "fmod_ret" : "bpf-lsm";
        assert.deepEqual(state, { available: true, attached: true, mechanism: expected });

        // A dry run refuses nothing and says what it would have done.
        const dry = await observe("deny-b", DRY_RUN, ["/bin/cat", SECRET]);
        assert.equal(dry.result.status, 0, `the dry run refused: ${dry.result.stderr}`);
        const [would] = dryRun.handle(dry.events);
        assert.equal(would?.denied, false, JSON.stringify(would));
        assert.equal(would?.deny_reason, "dry-run");
        // The same image's file in a container no trap selects: read as ever.
        const free = exec("deny-c", ["/bin/cat", SECRET]);
        assert.equal(free.status, 0, `another container was refused: ${free.stderr}`);

        // The agent that armed the deny dies by SIGKILL: the pinned link and map keep denying.
        await h.watcher().close({ keepPinned: true });
        const agent = spawn(
          process.execPath,
          [join(import.meta.dirname, "deny-agent.ts"), pinRoot, toJson(entries), toJson(rules)],
          { stdio: ["ignore", "pipe", "inherit"] },
        );
        const exited = new Promise<void>((resolve) => agent.on("exit", () => resolve()));
        let output = "";
        agent.stdout.on("data", (chunk: Buffer) => {
          output += chunk.toString();
        });
        for (let i = 0; i < 1200 && !output.includes("ready") && agent.exitCode === null; i++)
          await new Promise((r) => setTimeout(r, 50));
        assert.ok(output.includes("ready"), `the agent never got ready: ${JSON.stringify(output)}`);
        agent.kill("SIGKILL");
        await exited;
        const whileDead = exec("deny-a", ["/bin/cat", SECRET]);
        assert.notEqual(whileDead.status, 0, "read while no agent ran: the deny ended with its agent");
        const sshdWhileDead = exec("deny-a", ["/usr/sbin/sshd", "read", SECRET]);
        assert.equal(
          sshdWhileDead.status,
          0,
          `the allowed sshd was refused while no agent ran: ${sshdWhileDead.stderr}`,
        );
        // The next agent keeps the earlier deny until its first sync; the trap is gone there.
        const next = h.reopen();
        const beforeSync = exec("deny-a", ["/bin/cat", SECRET]);
        assert.notEqual(beforeSync.status, 0, "read before the next agent's first sync");
        // Last of the attacks, as it changes the container: a binary written over the allowed sshd.
        const written = exec("deny-a", [
          "/bin/sh",
          "-c",
          `cp /usr/bin/hive-attacker /usr/sbin/sshd && /usr/sbin/sshd read ${SECRET}`,
        ]);
        assert.notEqual(written.status, 0, "a binary written over sshd read the denied file");
        assert.match(written.stderr, /Permission denied/);
        next.sync([]);
        const lifted = exec("deny-a", ["/bin/cat", SECRET]);
        assert.equal(lifted.status, 0, `still refused after the trap went: ${lifted.stderr}`);
        assert.equal(existsSync(join(pinRoot, DENY_LINK_PIN)), false, "the deny link is still pinned");
        return {
          denied: {
            cat: cat.process.exe,
            preloaded: preloaded.process.exe_loader_env,
            chroot: jailed.process.exe,
          },
          kernelDenials: Number(deniedCount),
          dryRun: would?.deny_reason,
        };
      } finally {
        await denying?.close();
        await dryRun.close();
        await cd.stop();
      }
    },
  };
}
