/**
 * Kernel case for fairness under a flood: decoys in one cgroup alternate between two trapped
 * files as fast as they can (every access a new burst), which used to fill the ring buffer until
 * a single read that mattered was only counted lost. The kernel now summarises each flood key
 * (executable × trapped file × cgroup) beyond a few bursts a second, so a single read of another
 * trap, from another cgroup or from the decoys' cgroup by another executable, is delivered.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, rmdirSync } from "node:fs";
import type { KernelEvent } from "../../../runtime/kernel/contract.ts";
import { openKernelWatcher } from "../../../runtime/kernel/open-watcher.ts";
import { sleep } from "../../alerts/fixtures.ts";
import type { KernelCaseName } from "./case-names.ts";
import { type GuestHarness, pipelineFor } from "./process-cases.ts";

type FloodCaseName = Extract<
  KernelCaseName,
  "a flood from one cgroup is summarised in the kernel: a single read of another trap, from another cgroup and from the flooding cgroup by another executable, is delivered"
>;

const FLOOD_MS = 10_000;

/** Runs `argv` inside the cgroup at `cgroup` (moved there before it executes). */
function inCgroup(cgroup: string, argv: string[]): ChildProcess {
  const script = `echo $$ > ${cgroup}/cgroup.procs && exec "$@"`;
  return spawn("sh", ["-c", script, "sh", ...argv], { stdio: "ignore" });
}

const exited = (child: ChildProcess) =>
  new Promise<number | null>((resolve) => {
    if (child.exitCode !== null) resolve(child.exitCode);
    else child.on("exit", (code) => resolve(code));
  });

export function floodCases(h: GuestHarness): Record<FloodCaseName, () => Promise<Record<string, unknown>>> {
  return {
    async "a flood from one cgroup is summarised in the kernel: a single read of another trap, from another cgroup and from the flooding cgroup by another executable, is delivered"() {
      const attacker = process.env.HIVE_ATTACKER ?? "";
      assert.ok(attacker, "HIVE_ATTACKER (the static hive-attacker, built by the host suite) is not set");
      const decoyCg = "/sys/fs/cgroup/hive-decoy";
      const otherCg = "/sys/fs/cgroup/hive-other";
      for (const cg of [decoyCg, otherCg]) mkdirSync(cg, { recursive: true });
      // A watcher of its own (its counters and flood table start empty), feeding the real alert
      // pipeline as the agent does: what drains the ring buffer costs what it costs the agent.
      const w = openKernelWatcher({ pinRoot: null, burstGapMs: h.gapMs });
      const p = await pipelineFor([]);
      const seen: KernelEvent[] = [];
      w.onEvent((e) => {
        seen.push(e);
        p.handle([e]);
      });
      const decoys: ChildProcess[] = [];
      try {
        const [a, b, c] = ["flood-a.txt", "flood-b.txt", "flood-c.txt"].map((f) => h.file(f));
        w.sync([h.entry(a ?? "", 71), h.entry(b ?? "", 72), h.entry(c ?? "", 73)]);
        await w.whenReady();
        for (let i = 0; i < 3; i++)
          decoys.push(inCgroup(decoyCg, [attacker, "alternate", String(FLOOD_MS), a ?? "", b ?? ""]));
        await sleep(FLOOD_MS / 2);
        // Mid-flood: one read from another cgroup, one from the decoys' cgroup by another program.
        const single = [inCgroup(otherCg, ["cat", c ?? ""]), inCgroup(decoyCg, ["head", "-c1", c ?? ""])];
        assert.deepEqual(await Promise.all(single.map(exited)), [0, 0]);
        assert.deepEqual(await Promise.all(decoys.map(exited)), [0, 0, 0]);
        await w.flush(30_000);
        await sleep(2500); // past a flood window: the sweep reports what the last one held
        const counters = w.counters();
        assert.equal(counters.lost, 0n, `the decoys took the ring buffer: ${counters.lost} events lost`);
        const alerted = seen.filter((e) => e.slot === 73).map((e) => e.comm);
        assert.ok(alerted.includes("cat"), `the other cgroup's read was not delivered: ${alerted}`);
        assert.ok(alerted.includes("head"), `the decoys' cgroup's head was not delivered: ${alerted}`);
        const comms = p.alerts.map((a) => a.process.comm);
        assert.ok(comms.includes("cat") && comms.includes("head"), `not alerted: ${comms}`);
        const flood = seen.filter((e) => e.slot === 71 || e.slot === 72);
        const summarized = flood.reduce((sum, e) => sum + (e.summarized?.bursts ?? 0), 0);
        assert.ok(counters.held > 0n, "nothing was held: no flood?");
        // Every held burst is reported as a count on a later event of its key.
        assert.equal(BigInt(summarized), counters.held, `summarized ${summarized} of ${counters.held} held`);
        return {
          decoyEvents: flood.length,
          held: Number(counters.held),
          summarized,
          lost: Number(counters.lost),
          singleReads: alerted,
          alerts: p.alerts.length,
        };
      } finally {
        for (const d of decoys) d.kill("SIGKILL");
        await w.close();
        await p.close();
        for (const cg of [decoyCg, otherCg]) {
          try {
            rmdirSync(cg);
          } catch {
            // a process still in it: the guest is discarded after the run anyway
          }
        }
      }
    },
  };
}
