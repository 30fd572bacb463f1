/**
 * Kernel cases about an agent's restart: what the next agent adopts from the pins, what it
 * delivers and what it must not deliver again. Run by cases.ts in the guest.
 */
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, realpathSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { KernelEvent } from "../../../runtime/kernel/contract.ts";
import { openKernelWatcher } from "../../../runtime/kernel/open-watcher.ts";
import { readPinnedState } from "../../../runtime/kernel/pinned-state.ts";
import type { KernelCaseName } from "./case-names.ts";
import type { GuestHarness } from "./process-cases.ts";

type RestartCaseName = Extract<
  KernelCaseName,
  | "pinned maps survive an agent restart and are adopted; a clean shutdown removes them"
  | "after adopting an earlier agent's backlog, flush() waits for the new agent's own accesses"
  | "events are consumed only once handled: an agent killed before, or stopped while holding them, leaves them to the next"
  | "while acknowledgements are held, the ring drain sleeps instead of spinning a core"
  | "a trapped file replaced while no agent runs is reported to the next one: the directory hooks stay attached"
>;

const forSlot = (list: KernelEvent[], slot: number) => list.filter((e) => e.slot === slot);

export function restartCases(
  h: GuestHarness,
  pinRoot: string,
): Record<RestartCaseName, () => Promise<Record<string, unknown> | undefined>> {
  return {
    async "pinned maps survive an agent restart and are adopted; a clean shutdown removes them"() {
      let watcher = h.watcher();
      const path = h.file("pinned.txt");
      watcher.sync([h.entry(path, 30)]);
      // Delivered before the restart (its burst stays in the pinned burst map): never again after it.
      const before = forSlot(await h.observe(() => void h.run("cat", [path])), 30);
      assert.equal(before.length, 1, JSON.stringify(before, h.replacer));
      await watcher.close({ keepPinned: true });
      const state = readPinnedState(pinRoot);
      assert.ok(state, "nothing pinned");
      assert.equal(state.watched.length, 1);
      assert.equal(state.watched[0]?.slot, 30);
      // The process trackers stay attached through their pins: no exec goes unseen meanwhile.
      const pins = readdirSync(pinRoot);
      for (const pin of ["link_proc_exec", "link_proc_fork", "link_proc_exit", "hive_procs"])
        assert.ok(pins.includes(pin), `${pin} not pinned: ${pins}`);
      // While no agent runs: accesses still go to the pinned maps when the link is pinned.
      h.run("cat", [path]);
      watcher = h.reopen();
      const sinceRestart: KernelEvent[] = [];
      watcher.onEvent((e) => sinceRestart.push(e));
      assert.equal(watcher.counters().watched, 1, "the new agent adopted the watch map");
      await h.observe(() => void h.run("cat", [path]));
      const seen = forSlot(sinceRestart, 30);
      assert.ok(seen.length >= 1, "no event after adoption");
      const again = seen.filter((e) => e.ktimeNs === before[0]?.ktimeNs);
      assert.equal(
        again.length,
        0,
        `delivered again after the restart: ${JSON.stringify(again, h.replacer)}`,
      );
      const details = {
        linkPinned: state.attachMode !== null,
        adopted: watcher.adopted,
        events: seen.length,
      };
      if (state.attachMode !== null) {
        assert.equal(watcher.adopted, true);
        assert.ok(seen.length >= 2, `the access made while no agent ran was kept (events: ${seen.length})`);
        // ...and names the cat that was exec'd while no agent ran.
        const cat = realpathSync(execFileSync("sh", ["-c", "command -v cat"], { encoding: "utf8" }).trim());
        for (const e of seen) assert.deepEqual(e.process.exe, { exe: cat, source: "exec" });
      }
      await watcher.close();
      assert.equal(existsSync(pinRoot), false, "clean shutdown must remove the pins");
      watcher = h.reopen();
      assert.equal(watcher.counters().watched, 0);
      return details;
    },

    async "after adopting an earlier agent's backlog, flush() waits for the new agent's own accesses"() {
      let watcher = h.watcher();
      const path = h.file("backlog.txt");
      watcher.sync([h.entry(path, 32)]);
      await watcher.close({ keepPinned: true });
      const linkPinned = readPinnedState(pinRoot)?.attachMode != null;
      // Accesses while no agent runs: with the link pinned, bursts the next agent must deliver.
      for (let i = 0; i < 5; i++) h.run("cat", [path]);
      // A gap wider than a loaded host's stalls: the reader below always has a burst open.
      watcher = h.reopen(200);
      await watcher.whenReady();
      const fromReader: KernelEvent[] = [];
      watcher.onEvent((e) => {
        if (e.slot === 32 && e.tgid === reader.pid) fromReader.push(e);
      });
      const reader = spawn("sh", ["-c", `i=0; while [ $i -lt 5000 ]; do read x < ${path}; i=$((i+1)); done`]);
      const exited = new Promise<void>((resolve) => reader.on("exit", () => resolve()));
      // Reading for sure (its first burst, ended at the burst's age limit, has arrived).
      const deadline = Date.now() + 60_000;
      while (fromReader.length === 0 && reader.exitCode === null && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 20));
      assert.ok(fromReader.length > 0, "the reader never got going");
      const started = Date.now();
      await watcher.flush(60_000);
      const waitedMs = Date.now() - started;
      const atReturn = fromReader.length;
      await exited;
      await watcher.flush(60_000);
      const later = fromReader.length - atReturn;
      await watcher.close();
      watcher = h.reopen();
      assert.equal(
        later,
        0,
        `flush() returned after ${waitedMs} ms with ${later} of the reader's bursts still to come`,
      );
      return { linkPinned, waitedMs, readerBursts: atReturn };
    },

    async "events are consumed only once handled: an agent killed before, or stopped while holding them, leaves them to the next"() {
      let watcher = h.watcher();
      const path = h.file("killed.txt");
      watcher.sync([h.entry(path, 34)]);
      await watcher.close({ keepPinned: true });
      const agent = spawn(
        process.execPath,
        [join(import.meta.dirname, "stalled-agent.ts"), pinRoot, String(h.gapMs)],
        {
          stdio: ["pipe", "pipe", "inherit"],
        },
      );
      const exited = new Promise<void>((resolve) => agent.on("exit", () => resolve()));
      let output = "";
      agent.stdout.on("data", (chunk: Buffer) => {
        output += chunk.toString();
      });
      const until = async (what: string, done: () => boolean) => {
        const deadline = Date.now() + 60_000;
        while (!done() && agent.exitCode === null && Date.now() < deadline)
          await new Promise((r) => setTimeout(r, 20));
        assert.ok(done(), `${what} (the agent's output: ${JSON.stringify(output)})`);
      };
      const handled = (tgid: number) => output.includes(`event ${tgid}\n`);
      // Bursts both ways out of the kernel: the shell's first two reads reach the ring buffer
      // when its next read starts a burst; its last read and the cat are swept from the table.
      const bursts = () => ({
        sh: h.run("sh", ["-c", `for i in 1 2 3; do read x < ${path}; sleep 0.2; done`]),
        cat: h.run("cat", [path]),
      });
      await until("the agent never got ready", () => output.includes("ready"));
      const handledBefore = bursts();
      await until(
        "the agent did not handle the first bursts",
        () => handled(handledBefore.sh) && handled(handledBefore.cat),
      );
      await new Promise((r) => setTimeout(r, 1500)); // its acknowledgements reach the ring
      agent.stdin.write("block\n");
      await until("the agent did not block", () => output.includes("blocked"));
      const readNotHandled = bursts();
      await new Promise((r) => setTimeout(r, 20 * h.gapMs + 1000)); // time to read the ring and sweep the table
      agent.kill("SIGKILL");
      await exited;
      // The next agent handles them but holds them (as the loader does before its first sync), and stops.
      watcher = openKernelWatcher({ pinRoot, burstGapMs: h.gapMs });
      const held: KernelEvent[] = [];
      watcher.onEvent((e) => e.slot === 34 && held.push(e));
      watcher.holdAcks();
      const heldDeadline = Date.now() + 10_000;
      while (held.length < 4 && Date.now() < heldDeadline) await watcher.flush(1000);
      await watcher.close({ keepPinned: true });
      // ...so the one after it has them all again, and nothing the killed agent had handled.
      watcher = h.reopen();
      const seen: KernelEvent[] = [];
      watcher.onEvent((e) => e.slot === 34 && seen.push(e));
      const deadline = Date.now() + 10_000;
      while (seen.length < 4 && Date.now() < deadline) await watcher.flush(1000);
      await watcher.flush(1000);
      const count = (list: KernelEvent[], b: { sh: number; cat: number }) => ({
        sh: list.filter((e) => e.tgid === b.sh).length,
        cat: list.filter((e) => e.tgid === b.cat).length,
      });
      const result = {
        handledBeforeKill: count(seen, handledBefore),
        readNotHandled: count(seen, readNotHandled),
        heldThenStopped: count(held, readNotHandled),
      };
      assert.deepEqual(
        result,
        {
          handledBeforeKill: { sh: 0, cat: 0 },
          readNotHandled: { sh: 3, cat: 1 },
          heldThenStopped: { sh: 3, cat: 1 },
        },
        JSON.stringify({ seen, held }, h.replacer),
      );
      return result;
    },

    async "a trapped file replaced while no agent runs is reported to the next one: the directory hooks stay attached"() {
      let watcher = h.watcher();
      const sub = join(h.dir, "restart-parent");
      mkdirSync(sub, { recursive: true });
      const path = join(sub, "trapped.txt");
      writeFileSync(path, "v1\n");
      const dirEntry = { ...h.entry(sub, 41), accesses: [], kind: "parent" as const };
      watcher.sync([h.entry(path, 40), dirEntry]);
      await watcher.close({ keepPinned: true });
      // While no agent runs: the file is replaced (a new inode), as `mv x trapped.txt` or a package update does.
      writeFileSync(join(sub, "new.txt"), "v2\n");
      renameSync(join(sub, "new.txt"), path);
      watcher = h.reopen();
      const control: KernelEvent[] = [];
      watcher.onEvent((e) => e.slot === 41 && control.push(e));
      // The change is an earlier agent's backlog (its burst opened before this agent): flush() does
      // not wait for it, the sweep delivers it.
      const deadline = Date.now() + 10_000;
      while (control.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      const pins = readdirSync(pinRoot);
      assert.ok(
        control.length >= 1 && control.every((e) => e.kind === "parent"),
        `the replacement made while no agent ran was not reported (pins: ${pins})`,
      );
      return { control: control.length, parentLinkPinned: pins.some((p) => p.startsWith("link_parent_")) };
    },

    async "while acknowledgements are held, the ring drain sleeps instead of spinning a core"() {
      // A restarted agent holds acknowledgements until its first sync: read records stay in the
      // ring, where the kernel keeps reporting them readable.
      const w = openKernelWatcher({ pinRoot: null, burstGapMs: h.gapMs });
      try {
        const seen: KernelEvent[] = [];
        w.onEvent((e) => seen.push(e));
        const path = h.file("held.txt");
        w.sync([h.entry(path, 31)]);
        const release = w.holdAcks();
        h.run("cat", [path]);
        for (let i = 0; i < 200 && seen.length === 0; i++) await new Promise((r) => setTimeout(r, 50));
        assert.ok(seen.length > 0, "the held event never reached the listener");
        const cpu0 = process.cpuUsage();
        const wall0 = performance.now();
        await new Promise((r) => setTimeout(r, 2000));
        const used = process.cpuUsage(cpu0);
        const cpuMs = (used.user + used.system) / 1000;
        const wallMs = performance.now() - wall0;
        release();
        // A spinning drain takes a whole core (cpuMs ≈ wallMs); a sleeping one little (wake-ups,
        // timers, the emulated guest's overhead).
        assert.ok(cpuMs < wallMs / 2, `the agent used ${cpuMs} ms of CPU in ${wallMs} ms while holding`);
        return { cpuMs: Math.round(cpuMs), wallMs: Math.round(wallMs) };
      } finally {
        await w.close();
      }
    },
  };
}
