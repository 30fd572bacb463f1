/**
 * Kernel cases about capacity and its limits: many watched files, a stream of accesses, a full
 * burst table and a failed ring drain. Every access is delivered, held as a flood's count or
 * counted lost. Run by cases.ts in the guest.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { closeSync, mkdirSync, openSync, rmdirSync, statSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { CgroupIndex, parseKubeletCgroup } from "../../../runtime/discover/cgroup-containers.ts";
import type { KernelEvent } from "../../../runtime/kernel/contract.ts";
import { EVENT_LAYOUT, fileKeyFromStat } from "../../../runtime/kernel/layout.ts";
import { openKernelWatcher } from "../../../runtime/kernel/open-watcher.ts";
import type { KernelCaseName } from "./case-names.ts";
import type { GuestHarness } from "./process-cases.ts";

type CapacityCaseName = Extract<
  KernelCaseName,
  | "10,000 watched files: each read reports its own slot"
  | "100,000 accesses: every burst is delivered, held as a flood's count, or counted as lost"
  | "a full burst table loses nothing: the accesses it cannot hold are reported at once and counted"
  | "a failed ring drain is replaced: not ready meanwhile, and events flow again"
  | "a backlog is read in batches between which the event loop turns: acknowledgements, the spool and timers run while it is read"
  | "records that wrap past the end of a small ring buffer are read whole, lap after lap"
  | "a cgroup 13 levels below a container's, one made fresh per access, is named its container's by id, without walking the cgroup tree"
>;

const forSlot = (list: KernelEvent[], slot: number) => list.filter((e) => e.slot === slot);

export function capacityCases(
  h: GuestHarness,
): Record<CapacityCaseName, () => Promise<Record<string, unknown>>> {
  return {
    async "10,000 watched files: each read reports its own slot"() {
      const many = join(h.dir, "many");
      mkdirSync(many, { recursive: true });
      const paths: string[] = [];
      for (let i = 0; i < 10_000; i++) {
        const path = join(many, `f${i}`);
        writeFileSync(path, "x");
        paths.push(path);
      }
      const t0 = performance.now();
      h.watcher().sync(paths.map((p, i) => h.entry(p, 1000 + i)));
      const syncMs = performance.now() - t0;
      assert.equal(h.watcher().counters().watched, 10_000);
      const picks = [0, 1, 4999, 7777, 9999].concat(Array.from({ length: 45 }, (_, i) => i * 211 + 3));
      const seen = await h.observe(
        () =>
          void h.run(
            "cat",
            picks.map((i) => paths[i] ?? ""),
          ),
      );
      assert.deepEqual(
        seen.map((e) => e.slot).sort((a, b) => a - b),
        picks.map((i) => 1000 + i).sort((a, b) => a - b),
      );
      const t1 = performance.now();
      h.watcher().sync(paths.slice(0, 5000).map((p, i) => h.entry(p, 1000 + i)));
      const removeMs = performance.now() - t1;
      assert.equal(h.watcher().counters().watched, 5000);
      return { syncMs: Math.round(syncMs), removeHalfMs: Math.round(removeMs) };
    },

    async "100,000 accesses: every burst is delivered, held as a flood's count, or counted as lost"() {
      const a = h.file("stress-a.txt");
      const b = h.file("stress-b.txt");
      h.watcher().sync([h.entry(a, 20, ["open"]), h.entry(b, 21, ["open"])]);
      await h.watcher().flush();
      const before = h.watcher().counters();
      const started = performance.now();
      let loopMs = 0;
      const seen = await h.observe(
        () => {
          // Alternating files: every access starts a new burst.
          const t = performance.now();
          for (let i = 0; i < 50_000; i++) {
            closeSync(openSync(a, "r"));
            closeSync(openSync(b, "r"));
          }
          loopMs = performance.now() - t;
        },
        h.watcher(),
        120_000,
      );
      const after = h.watcher().counters();
      const bursts = after.bursts - before.bursts;
      const lost = after.lost - before.lost;
      // One thread alternating two files is a flood: beyond its budget, bursts are held and counted.
      const held = after.held - before.held;
      const delivered = BigInt(seen.length);
      const checks = after.checks - before.checks;
      assert.ok(checks >= 100_000n, `checks ${checks}`);
      assert.ok(bursts >= 100_000n, `bursts ${bursts}`);
      assert.ok(delivered + lost + held >= bursts, `silently missing: ${bursts - delivered - lost - held}`);
      assert.ok(delivered <= bursts, `duplicates: ${delivered - bursts}`);
      const counted = seen.reduce((n, e) => n + e.count, 0);
      assert.ok(BigInt(counted) <= checks);
      return {
        bursts: Number(bursts),
        delivered: seen.length,
        held: Number(held),
        lost: Number(lost),
        loopSeconds: Math.round(loopMs) / 1000,
        totalSeconds: Math.round(performance.now() - started) / 1000,
      };
    },

    async "a full burst table loses nothing: the accesses it cannot hold are reported at once and counted"() {
      const path = h.file("burst-table.txt");
      const small = openKernelWatcher({ pinRoot: null, burstGapMs: h.gapMs, burstCapacity: 2 });
      try {
        const seen: KernelEvent[] = [];
        small.onEvent((e) => seen.push(e));
        small.sync([h.entry(path, 31)]);
        await small.flush();
        // Eight readers that stay alive (a thread's exit would end its burst): two fit the table.
        const script =
          "open(my $f, '<', $ARGV[0]) or die; my @l = <$f>; $| = 1; print qq(read\n); sleep 120;";
        const readers = Array.from({ length: 8 }, () => spawn("perl", ["-e", script, path]));
        // Each says when it has read; all are still alive (and their bursts pending) after that.
        await Promise.all(readers.map((r) => new Promise((res) => r.stdout.once("data", res))));
        await small.flush();
        const counters = small.counters();
        assert.equal(forSlot(seen, 31).length, 8, JSON.stringify({ seen, counters }, h.replacer));
        // Two fit (an entry leaves only when emitted: readers alive keep theirs); the others were
        // reported at once. What matters is that all eight arrived and none was lost.
        assert.ok(counters.unfolded >= 1n, `unfolded ${counters.unfolded}`);
        assert.equal(counters.lost, 0n);
        for (const r of readers) r.kill("SIGKILL");
        return { events: forSlot(seen, 31).length, unfolded: counters.unfolded };
      } finally {
        await small.close();
      }
    },

    async "a failed ring drain is replaced: not ready meanwhile, and events flow again"() {
      const path = h.file("worker.txt");
      const w = openKernelWatcher({ pinRoot: null, burstGapMs: h.gapMs });
      try {
        const seen: KernelEvent[] = [];
        w.onEvent((e) => seen.push(e));
        w.sync([h.entry(path, 32)]);
        await w.flush();
        w.consumer?.injectFailure(); // the fault: the drain fails at its next turn
        for (let i = 0; i < 100 && w.health().ok; i++) await new Promise((r) => setTimeout(r, 10));
        assert.equal(w.health().ok, false, "ready while no drain reads the ring buffer");
        h.run("cat", [path]); // made while no drain runs: waits in the ring buffer
        for (let i = 0; i < 100 && !w.health().ok; i++) await new Promise((r) => setTimeout(r, 100));
        assert.equal(w.health().ok, true, w.health().message);
        await w.flush();
        assert.equal(forSlot(seen, 32).length, 1, JSON.stringify(seen, h.replacer));
        assert.equal(w.counters().consumerRestarts, 1);
        return { restarts: w.counters().consumerRestarts, events: forSlot(seen, 32).length };
      } finally {
        await w.close();
      }
    },

    async "a backlog is read in batches between which the event loop turns: acknowledgements, the spool and timers run while it is read"() {
      // 8,000 bursts wait in the ring while reading is paused, then are read as one backlog. The
      // agent's other work (acknowledgements that give the ring back, the spool's writes, lease
      // renewals, /healthz) runs in turns of the event loop: one between every two batches.
      const a = h.file("backlog-a.txt");
      const b = h.file("backlog-b.txt");
      const w = openKernelWatcher({ pinRoot: null, burstGapMs: h.gapMs, floodBudget: 0 });
      try {
        let paused = true;
        w.gateRelease({ holding: () => false, full: () => paused });
        let events = 0;
        w.onEvent((e) => {
          if (e.slot === 24 || e.slot === 25) events++;
        });
        w.sync([h.entry(a, 24, ["open"]), h.entry(b, 25, ["open"])]);
        await w.whenReady();
        for (let i = 0; i < 4000; i++) {
          closeSync(openSync(a, "r"));
          closeSync(openSync(b, "r"));
        }
        // A turn counter: the most events handled between two turns of the event loop.
        let mostBetweenTurns = 0;
        let atLastTurn = 0;
        let turns = 0;
        let ticking = true;
        const tick = () => {
          mostBetweenTurns = Math.max(mostBetweenTurns, events - atLastTurn);
          atLastTurn = events;
          turns++;
          if (ticking) setImmediate(tick);
        };
        setImmediate(tick);
        paused = false;
        for (let i = 0; i < 600 && events < 8000; i++) await new Promise((r) => setTimeout(r, 100));
        ticking = false;
        const lost = w.counters().lost;
        assert.equal(events, 8000, `events ${events} of 8,000 (lost ${lost})`);
        assert.ok(
          mostBetweenTurns <= 2 * 256,
          `${mostBetweenTurns} events were handled between two turns of the event loop (${turns} turns)`,
        );
        return { events, mostBetweenTurns, turns };
      } finally {
        await w.close();
      }
    },

    async "records that wrap past the end of a small ring buffer are read whole, lap after lap"() {
      // 64 KiB hold 72 records of 904 bytes: a record straddles the end on most laps, and the
      // reader maps the data once, so each of those is joined from the end and the start.
      const ringBytes = 64 * 1024;
      const a = h.file("wrap-a.txt");
      const b = h.file("wrap-b.txt");
      const w = openKernelWatcher({ pinRoot: null, burstGapMs: h.gapMs, ringBytes, floodBudget: 0 });
      try {
        const seen: KernelEvent[] = [];
        w.onEvent((e) => seen.push(e));
        w.sync([h.entry(a, 22, ["open"]), h.entry(b, 23, ["open"])]);
        await w.flush();
        const before = w.counters();
        // Two programs alternate the files at once (a new burst each open), so that records of
        // both interleave: a record's head and tail from two records would name two programs.
        const readers = [
          spawn("perl", ["-e", "for (1..800) { for my $p (@ARGV) { open(my $f, '<', $p) or die } }", a, b]),
          spawn("python3", [
            "-c",
            "import sys\nfor _ in range(800):\n for p in sys.argv[1:]: open(p).close()",
            a,
            b,
          ]),
        ];
        const codes = await Promise.all(readers.map((r) => new Promise((res) => r.on("exit", res))));
        assert.deepEqual(codes, [0, 0]);
        await w.flush(60_000);
        const after = w.counters();
        const keys = new Map([22, 23].map((slot, i) => [slot, fileKeyFromStat(statSync(i === 0 ? a : b))]));
        const programs = new Map(readers.map((r) => [r.pid, r.spawnargs[0] ?? ""]));
        const mine = seen.filter((e) => programs.has(e.tgid));
        const laps = (mine.length * (EVENT_LAYOUT.size + 8)) / ringBytes;
        assert.ok(laps >= 10, `${mine.length} events went round the ring ${laps.toFixed(1)} times`);
        for (const e of mine) {
          const what = JSON.stringify(e, h.replacer);
          assert.deepEqual(e.key, keys.get(e.slot), `slot ${e.slot}'s file: ${what}`);
          // Head (thread, comm) and tail (the executable's path and file, at the record's end) agree.
          const program = programs.get(e.tgid) ?? "";
          assert.ok(e.comm.startsWith(program), what);
          const exe = e.process.exe.exe ?? "";
          assert.ok(basename(exe).startsWith(program), what);
          assert.equal(e.process.provenance?.file.ino, BigInt(statSync(exe).ino), what);
        }
        const bursts = after.bursts - before.bursts;
        const accounted = BigInt(seen.length) + (after.lost - before.lost) + (after.held - before.held);
        assert.ok(accounted >= bursts, `silently missing: ${bursts - accounted}`);
        return { events: mine.length, laps: Math.round(laps), lost: Number(after.lost - before.lost) };
      } finally {
        await w.close();
      }
    },

    async "a cgroup 13 levels below a container's, one made fresh per access, is named its container's by id, without walking the cgroup tree"() {
      // The attacker: a container that may mount cgroup2 nests its processes far below its own
      // cgroup, in a fresh sub-cgroup per access, so that the index never knows them (its walk
      // stopped at depth 8) and each unknown id costs a walk of the whole tree.
      const root = "/sys/fs/cgroup";
      const uid = "6f1c3e0a-2b7d-4c51-9a8e-0d2f4b6c8e10";
      const id = "cd".repeat(32);
      const pod = join(root, "kubepods", `pod${uid}`);
      const deep = join(pod, id, ...Array.from({ length: 12 }, (_, i) => `n${i}`));
      mkdirSync(deep, { recursive: true });
      const made: string[] = [];
      try {
        const index = new CgroupIndex(root);
        for (let i = 0; i < 20; i++) {
          // The last one named as a removed cgroup is spelt, to be taken for gone.
          const fresh = join(deep, i === 19 ? "access (deleted)" : `access-${i}`);
          mkdirSync(fresh);
          made.push(fresh);
          const path = index.path(statSync(fresh, { bigint: true }).ino, process.hrtime.bigint());
          assert.deepEqual(
            parseKubeletCgroup(path ?? ""),
            { podUid: uid, containerId: id, scheme: "containerd" },
            path,
          );
        }
        // A cgroup removed before it was looked up is gone, not a reason to walk.
        const removed = join(deep, "removed");
        mkdirSync(removed);
        const removedId = statSync(removed, { bigint: true }).ino;
        rmdirSync(removed);
        assert.equal(index.path(removedId, process.hrtime.bigint()), undefined);
        assert.equal(index.walks, 0);
        return {
          depth: deep.split("/").length - root.split("/").length + 1,
          lookups: 21,
          walks: index.walks,
        };
      } finally {
        for (const dir of made.reverse()) rmdirSync(dir);
        for (let dir = deep; dir !== dirname(pod); dir = dirname(dir)) rmdirSync(dir);
      }
    },
  };
}
