/**
 * Kernel case for fairness under a flood: decoys in one cgroup alternate between two trapped
 * files as fast as they can (every access a new burst), which used to fill the ring buffer until
 * a single read that mattered was only counted lost. The kernel now summarises each flood key
 * (executable × trapped file × cgroup) beyond a few bursts a second, so a single read of another
 * trap, from another cgroup or from the decoys' cgroup by another executable, is delivered. The
 * decoys' program is allowed, and the same program run from their cgroup with LD_PRELOAD set is
 * another flood key (every fact an allow list reads is part of the key): each of its reads alerts,
 * none is held and later reported as a count of the allowed flood.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, rmdirSync } from "node:fs";
import { resolveInRoot } from "../../../runtime/discover/safe-path.ts";
import type { KernelEvent } from "../../../runtime/kernel/contract.ts";
import { openKernelWatcher } from "../../../runtime/kernel/open-watcher.ts";
import { proveWith } from "../../../runtime/kernel/trap-proof.ts";
import { sleep } from "../../alerts/fixtures.ts";
import type { KernelCaseName } from "./case-names.ts";
import { type GuestHarness, pipelineFor } from "./process-cases.ts";

type FloodCaseName = Extract<
  KernelCaseName,
  "a flood from one cgroup is summarised in the kernel: a single read of another trap, from another cgroup and from the flooding cgroup by another executable, is delivered, and the allowed flooding program run with LD_PRELOAD is alerted at each read"
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
    async "a flood from one cgroup is summarised in the kernel: a single read of another trap, from another cgroup and from the flooding cgroup by another executable, is delivered, and the allowed flooding program run with LD_PRELOAD is alerted at each read"() {
      const attacker = process.env.HIVE_ATTACKER ?? "";
      assert.ok(attacker, "HIVE_ATTACKER (the static hive-attacker, built by the host suite) is not set");
      const decoyCg = "/sys/fs/cgroup/hive-decoy";
      const otherCg = "/sys/fs/cgroup/hive-other";
      for (const cg of [decoyCg, otherCg]) mkdirSync(cg, { recursive: true });
      // A watcher of its own (its counters and flood table start empty), feeding the real alert
      // pipeline as the agent does: what drains the ring buffer costs what it costs the agent.
      const w = openKernelWatcher({ pinRoot: null, burstGapMs: h.gapMs });
      // The decoys' program is allowed (the image's file, on the host here): its flood alerts
      // nobody, and must not carry the same program run with LD_PRELOAD into an allowed summary.
      const attackerFile = resolveInRoot("/", attacker, {}, proveWith(w.proofMaps())).key;
      const p = await pipelineFor([{ exe: attacker }], {
        host: true,
        files: new Map([[attacker, [attackerFile]]]),
      });
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
        // The flooding program itself, from the flooding cgroup, reading the flooded file with
        // LD_PRELOAD set: three processes, each to be alerted (loader-env), none held with the flood.
        for (let i = 0; i < 3; i++) {
          const preloaded = inCgroup(decoyCg, [
            "env",
            "LD_PRELOAD=/dev/shm/hive-x.so",
            attacker,
            "read",
            a ?? "",
          ]);
          assert.equal(await exited(preloaded), 0);
        }
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
        const preloadedAlerts = p.alerts.filter((x) => x.process.exe_loader_env?.includes("LD_PRELOAD"));
        assert.equal(
          preloadedAlerts.length,
          3,
          `the LD_PRELOAD reads were not each alerted (held with the allowed flood?): ${preloadedAlerts.length} of 3`,
        );
        assert.ok(
          preloadedAlerts.every((x) => x.allow_misses?.some((m) => m.reason === "loader-env")),
          "each LD_PRELOAD read names its loader-env miss",
        );
        // The allowed flood itself alerts nobody.
        assert.equal(
          p.alerts.filter((x) => x.process.exe === attacker && !x.process.exe_loader_env).length,
          0,
        );
        const flood = seen.filter((e) => e.slot === 71 || e.slot === 72);
        const summarized = flood.reduce((sum, e) => sum + (e.summarized?.bursts ?? 0), 0);
        assert.ok(counters.held > 0n, "nothing was held: no flood?");
        // Every held burst is reported as a count on a later event of its key.
        assert.equal(BigInt(summarized), counters.held, `summarized ${summarized} of ${counters.held} held`);
        // A summary names the flooding program: its key's last event was found among the recent ones.
        const summaries = flood.filter((e) => (e.summarized?.bursts ?? 0) > 0);
        assert.ok(
          summaries.every((e) => e.process.exe.source !== "unknown" && e.process.exe.exe === attacker),
          `a summary without its program: ${JSON.stringify(summaries.map((e) => e.process.exe))}`,
        );
        return {
          decoyEvents: flood.length,
          held: Number(counters.held),
          summarized,
          lost: Number(counters.lost),
          singleReads: alerted,
          preloadedAlerts: preloadedAlerts.length,
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
