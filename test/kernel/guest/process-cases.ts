/**
 * Kernel cases for process identity (bpf/process.bpf.h): run inside the test VM by
 * cases.ts, against the real program. Every event must name the executable the kernel
 * resolved and the parent, whatever the process did to its name or how it was started.
 */
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  realpathSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import type { Alert } from "../../../api/alert.ts";
import type { AccessKind } from "../../../api/meta.ts";
import type { AllowEntry } from "../../../api/policy.ts";
import type { AllowFiles } from "../../../runtime/alerts/allowlist.ts";
import { createBootClock } from "../../../runtime/alerts/boot-clock.ts";
import { buildAlert } from "../../../runtime/alerts/build-alert.ts";
import { createAlertPipeline } from "../../../runtime/alerts/pipeline.ts";
import { resolveInRoot } from "../../../runtime/discover/safe-path.ts";
import type { KernelEvent, WatchEntry } from "../../../runtime/kernel/contract.ts";
import type { LibbpfKernelWatcher } from "../../../runtime/kernel/loader.ts";
import { openKernelWatcher } from "../../../runtime/kernel/open-watcher.ts";
import { proveWith } from "../../../runtime/kernel/trap-proof.ts";
import { createHiveMetrics } from "../../../runtime/metrics/metrics.ts";
import { assertValidAlert, captureLogger, counterValue, makeSource } from "../../alerts/fixtures.ts";
import type { KernelCaseName } from "./case-names.ts";

export interface GuestHarness {
  watcher: () => LibbpfKernelWatcher;
  /** A new watcher on the runner's pin root (adopting what is pinned), made the current one. */
  reopen: (burstGapMs?: number) => LibbpfKernelWatcher;
  observe: (
    action: () => void | Promise<void>,
    w?: LibbpfKernelWatcher,
    timeoutMs?: number,
  ) => Promise<KernelEvent[]>;
  file: (name: string, content?: string) => string;
  /** A watch entry for `path` (its stat identity), every access kind unless `accesses` says. */
  entry: (path: string, slot: number, accesses?: AccessKind[]) => WatchEntry;
  /** Runs a command to completion; throws when it fails. Returns its pid. */
  run: (cmd: string, args: string[]) => number;
  dir: string;
  gapMs: number;
  replacer: (key: string, value: unknown) => unknown;
}

type ProcessCaseName = Extract<
  KernelCaseName,
  | "an event names the executable the kernel resolved, its parent and ancestors, for a process that exits at once"
  | "a process that renamed itself is named by its executable; comm is what it set"
  | "a binary run through a symlink or a relative path is named by the file executed"
  | "a process that predates the program is named from the seed, and marked as seeded"
  | "allow: an allowed executable raises no alert and is counted; a copy under the allowed name elsewhere or another binary alerts"
  | "allow: a child of an allowed parent raises no alert; the same child under another parent alerts"
  | "a decoy reading the trap in a loop does not hide a single read by another executable"
>;

/** Where `name` resolves on PATH, through every symlink: what the kernel must report. */
function resolved(name: string): string {
  const which = spawnSync("sh", ["-c", `command -v ${name}`], { encoding: "utf8" }).stdout.trim();
  assert.ok(which, `${name} not on PATH`);
  return realpathSync(which);
}

/**
 * Kernel events through the real alert pipeline, with `allow` on the trap; alerts captured.
 * `files`: what discover found at the entries' exact paths; `host`: the trap is on a host path
 * (the guest's own root, as standalone mode watches one), else in a container.
 */
export async function pipelineFor(
  allow: AllowEntry[],
  options: {
    rateLimit?: { perSecond: number; burst: number };
    files?: AllowFiles;
    host?: boolean;
    deny?: "deny" | "dryRun";
  } = {},
) {
  const { rateLimit, files } = options;
  const metrics = createHiveMetrics({ processMetrics: false });
  const alerts: Alert[] = [];
  const pipeline = await createAlertPipeline({
    logger: captureLogger().logger,
    metrics,
    lines: (line) => alerts.push(JSON.parse(line) as Alert),
    ...(rateLimit ? { rateLimit } : {}),
  });
  const source = makeSource("allow-case");
  source.allow = allow;
  if (options.host) source.allowHost = true;
  if (files) source.allowFiles = files;
  if (options.deny) source.deny = options.deny;
  return {
    alerts,
    /** Hands `events` to the pipeline; returns the alerts they raised, each valid. */
    handle(events: KernelEvent[]): Alert[] {
      const before = alerts.length;
      for (const e of events) pipeline.handle(e, source);
      const raised = alerts.slice(before);
      for (const a of raised) assertValidAlert(a);
      return raised;
    },
    allowed: (entry: number) => counterValue(metrics.allowedAccesses, { entry: String(entry) }),
    close: () => pipeline.close(),
  };
}

export function processCases(
  h: GuestHarness,
): Record<ProcessCaseName, () => Promise<Record<string, unknown>>> {
  const clock = createBootClock();
  /** The files at `paths` as discover would find them: safe walk from the root, proven by the kernel. */
  const allowFiles = (paths: string[]): AllowFiles => {
    const prove = proveWith(h.watcher().proofMaps());
    return new Map(paths.map((p) => [p, [resolveInRoot("/", p, {}, prove).key]]));
  };
  /** The alert each event becomes must validate against the published schema. */
  const alertOf = (e: KernelEvent, w: LibbpfKernelWatcher) => {
    const alert = buildAlert(e, makeSource("process-case"), { clock, ancestors: (p) => w.ancestors(p) });
    assertValidAlert(alert);
    return alert;
  };
  const only = (seen: KernelEvent[], slot: number, comm?: string) => {
    const mine = seen.filter((e) => e.slot === slot && (comm === undefined || e.comm === comm));
    assert.equal(mine.length, 1, `expected one event: ${JSON.stringify(seen, h.replacer)}`);
    return mine[0] as KernelEvent;
  };

  return {
    async "an event names the executable the kernel resolved, its parent and ancestors, for a process that exits at once"() {
      const path = h.file("identity.txt");
      h.watcher().sync([h.entry(path, 40)]);
      const e = only(await h.observe(() => void spawnSync("sh", ["-c", `cat ${path}; true`])), 40, "cat");
      assert.deepEqual(e.process.exe, { exe: resolved("cat"), source: "exec" });
      assert.ok(e.process.execNs > 0n && e.process.execNs <= e.ktimeNs, "exec time before the access");
      assert.equal(e.process.parent?.comm, "sh");
      assert.deepEqual(e.process.parent?.exe, { exe: realpathSync("/bin/sh"), source: "exec" });
      assert.equal(e.process.ppid, e.process.parent?.pid);
      // The shell's parent is this test process: an ancestor whose path crosses the guest's mounts.
      const alert = alertOf(e, h.watcher());
      assert.equal(alert.process.ancestors?.[0]?.pid, process.pid);
      assert.equal(alert.process.ancestors?.[0]?.exe, realpathSync(process.execPath));
      return { process: alert.process };
    },

    async "a process that renamed itself is named by its executable; comm is what it set"() {
      const path = h.file("renamed.txt");
      h.watcher().sync([h.entry(path, 41)]);
      // perl sets the thread name (prctl PR_SET_NAME) when $0 is assigned.
      const script = `$0 = "sshd"; open(my $f, "<", $ARGV[0]) or die; my @l = <$f>;`;
      const e = only(await h.observe(() => void spawnSync("perl", ["-e", script, path])), 41);
      assert.equal(e.comm, "sshd");
      assert.deepEqual(e.process.exe, { exe: resolved("perl"), source: "exec" });
      return { comm: e.comm, exe: e.process.exe.exe };
    },

    async "a binary run through a symlink or a relative path is named by the file executed"() {
      const path = h.file("indirect.txt");
      const bin = join(h.dir, "bin");
      mkdirSync(bin, { recursive: true });
      const real = join(bin, "hcat");
      if (!existsSync(real)) {
        copyFileSync(resolved("cat"), real);
        chmodSync(real, 0o755);
        symlinkSync("bin/hcat", join(h.dir, "hlink"));
      }
      h.watcher().sync([h.entry(path, 42)]);
      const viaLink = only(await h.observe(() => void spawnSync(join(h.dir, "hlink"), [path])), 42);
      const relative = only(await h.observe(() => void spawnSync("./bin/hcat", [path], { cwd: h.dir })), 42);
      assert.deepEqual(viaLink.process.exe, { exe: real, source: "exec" });
      assert.deepEqual(relative.process.exe, { exe: real, source: "exec" });
      return { viaLink: viaLink.process.exe.exe, relative: relative.process.exe.exe };
    },

    async "a process that predates the program is named from the seed, and marked as seeded"() {
      const path = h.file("seeded.txt");
      const go = join(h.dir, "seed-go");
      // The shell itself reads the file (a redirect, no child), once the new program is loaded.
      const early = spawn("sh", ["-c", `while [ ! -e ${go} ]; do sleep 0.05; done; read l < ${path}`]);
      const exited = new Promise((resolve) => early.on("exit", resolve));
      await new Promise((r) => setTimeout(r, 300));
      const fresh = openKernelWatcher({ pinRoot: null, burstGapMs: h.gapMs });
      try {
        const seen: KernelEvent[] = [];
        fresh.onEvent((event) => seen.push(event));
        fresh.sync([h.entry(path, 43)]);
        await fresh.flush();
        writeFileSync(go, "");
        await exited;
        await fresh.flush();
        const e = only(seen, 43);
        assert.equal(e.tgid, early.pid);
        assert.deepEqual(e.process.exe, { exe: realpathSync("/bin/sh"), source: "seed" });
        const alert = alertOf(e, fresh);
        assert.equal(alert.process.exe_source, "seed");
        return { process: alert.process };
      } finally {
        await fresh.close();
      }
    },

    async "allow: an allowed executable raises no alert and is counted; a copy under the allowed name elsewhere or another binary alerts"() {
      const path = h.file("allow.txt");
      const copy = join(h.dir, "sbin", "sshd"); // cat, copied under sshd's name
      mkdirSync(join(h.dir, "sbin"), { recursive: true });
      copyFileSync(resolved("cat"), copy);
      chmodSync(copy, 0o755);
      h.watcher().sync([h.entry(path, 44)]);
      const p = await pipelineFor([{ exe: "/usr/sbin/sshd" }, { exe: resolved("cat") }], {
        files: allowFiles([resolved("cat")]),
        host: true,
      });
      try {
        p.handle(await h.observe(() => void spawnSync("cat", [path])));
        assert.equal(p.alerts.length, 0, `allowed cat alerted: ${JSON.stringify(p.alerts)}`);
        assert.equal(await p.allowed(1), 1);
        p.handle(await h.observe(() => void spawnSync(copy, [path])));
        p.handle(await h.observe(() => void spawnSync("head", ["-c1", path])));
        assert.deepEqual(
          p.alerts.map((a) => a.process.exe),
          [copy, resolved("head")],
        );
        assert.equal(await p.allowed(0), 0);
        return { alerted: p.alerts.map((a) => a.process.exe), allowed: await p.allowed(1) };
      } finally {
        await p.close();
      }
    },

    async "allow: a child of an allowed parent raises no alert; the same child under another parent alerts"() {
      const path = h.file("allow-parent.txt");
      h.watcher().sync([h.entry(path, 45)]);
      const p = await pipelineFor([{ "parent-exe": realpathSync("/bin/sh"), accesses: ["read", "open"] }], {
        files: allowFiles([realpathSync("/bin/sh")]),
        host: true,
      });
      try {
        p.handle(await h.observe(() => void spawnSync("sh", ["-c", `cat ${path}; true`])));
        assert.equal(p.alerts.length, 0, `child of sh alerted: ${JSON.stringify(p.alerts)}`);
        assert.equal(await p.allowed(0), 1);
        const underPerl = `system("cat", $ARGV[0]) == 0 or die;`;
        p.handle(await h.observe(() => void spawnSync("perl", ["-e", underPerl, path])));
        assert.equal(p.alerts.length, 1);
        assert.equal(p.alerts[0]?.process.parent?.exe, resolved("perl"));
        return { alertedParent: p.alerts[0]?.process.parent?.exe, allowed: await p.allowed(0) };
      } finally {
        await p.close();
      }
    },

    async "a decoy reading the trap in a loop does not hide a single read by another executable"() {
      const path = h.file("decoy.txt");
      h.watcher().sync([h.entry(path, 46)]);
      const p = await pipelineFor([], { rateLimit: { perSecond: 1, burst: 3 } });
      try {
        const loop = `i=0; while [ $i -lt 100 ]; do cat ${path} >/dev/null; i=$((i+1)); done; head -c1 ${path}`;
        const seen = await h.observe(() => void spawnSync("sh", ["-c", loop]));
        p.handle(seen.filter((e) => e.slot === 46));
        const byExe = (exe: string) => p.alerts.filter((a) => a.process.exe === exe).length;
        assert.ok(byExe(resolved("cat")) < 10, `the decoy was not rate limited: ${byExe(resolved("cat"))}`);
        assert.equal(byExe(resolved("head")), 1, "the single read by head must alert");
        return {
          decoyAlerts: byExe(resolved("cat")),
          headAlerts: byExe(resolved("head")),
          events: seen.length,
        };
      } finally {
        await p.close();
      }
    },
  };
}
