/**
 * Kernel cases about upgrades on a live node: the agent of an earlier build left its program
 * attached and its maps pinned, and this build's agent starts. Builds of bpf/hive.bpf.c made by
 * the host suite stand for the earlier version (bpf/build.sh HIVE_BPF_VARIANT): other code with
 * the same maps, or another map layout. Run by cases.ts in the guest.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { closeSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { PROGRAM_PIN } from "../../../runtime/kernel/attach.ts";
import type { KernelEvent } from "../../../runtime/kernel/contract.ts";
import { libbpf } from "../../../runtime/kernel/libbpf-ffi.ts";
import { openKernelWatcher } from "../../../runtime/kernel/open-watcher.ts";
import { pinnedProgramInfo } from "../../../runtime/kernel/program-info.ts";
import type { KernelCaseName } from "./case-names.ts";
import type { GuestHarness } from "./process-cases.ts";

type UpgradeCaseName = Extract<
  KernelCaseName,
  | "an upgrade to another build replaces the running program without a gap: every access across it is delivered, and the new build runs"
  | "an upgrade to another map layout counts what the earlier version left unread, and watches with fresh maps"
>;

/** The id of the program a pinned link runs (struct bpf_link_info: prog_id at offset 8). */
function pinnedLinkProgram(path: string): number {
  const lib = libbpf();
  const fd = lib.bpf_obj_get(path) as number;
  assert.ok(fd >= 0, `no link pinned at ${path}`);
  try {
    const info = Buffer.alloc(64);
    assert.ok((lib.bpf_obj_get_info_by_fd(fd, info, [info.length]) as number) === 0);
    return info.readUInt32LE(8);
  } finally {
    closeSync(fd);
  }
}

/** The earlier build's object, built on the host (kernel-suite.ts). */
function variant(name: "HIVE_VARIANT_PROGRAM" | "HIVE_VARIANT_LAYOUT"): string {
  const path = process.env[name];
  assert.ok(path, `${name} is not set: the host suite builds the earlier version's object`);
  return path;
}

/**
 * Reads made while no agent runs wait in the ring for the next one, which must not call them
 * delivered before its listeners have them: with its alerts' room full (the gate holds reading)
 * flush() says no, and says yes once they have arrived.
 */
async function flushWaitsForBacklog(
  h: GuestHarness,
  options: { pinRoot: string; burstGapMs: number; floodBudget: number },
  path: string,
): Promise<Record<string, unknown>> {
  for (let i = 0; i < 5; i++) h.run("cat", [path]);
  const next = openKernelWatcher(options);
  let full = true;
  next.gateRelease({ holding: () => false, full: () => full });
  const seen: KernelEvent[] = [];
  next.onEvent((e) => e.slot === 38 && seen.push(e));
  const flushedWhileHeld = await next.flush(1500);
  const deliveredWhileHeld = seen.length;
  full = false;
  next.gateRelease(undefined);
  const flushedBacklog = await next.flush(10_000);
  await next.close({ keepPinned: true });
  return { flushedWhileHeld, deliveredWhileHeld, flushedBacklog, backlogDelivered: seen.length };
}

export function upgradeCases(
  h: GuestHarness,
  pinRoot: string,
): Record<UpgradeCaseName, () => Promise<Record<string, unknown>>> {
  return {
    async "an upgrade to another build replaces the running program without a gap: every access across it is delivered, and the new build runs"() {
      await h.watcher().close(); // a clean node: nothing pinned
      // No flood budget: every read below is one event, not a flood's summary.
      const options = { pinRoot, burstGapMs: h.gapMs, floodBudget: 0 };
      const earlier = openKernelWatcher({ ...options, objectPath: variant("HIVE_VARIANT_PROGRAM") });
      const path = h.file("upgrade.txt");
      earlier.sync([h.entry(path, 38)]);
      const earlierTag = earlier.programVersion().tag;
      const trackerBefore = pinnedLinkProgram(join(pinRoot, "link_proc_exec"));
      const seen: KernelEvent[] = [];
      earlier.onEvent((e) => e.slot === 38 && seen.push(e));
      // One process per read, every 50 ms, from before the earlier agent stops to after this one runs.
      const reader = spawn("sh", [
        "-c",
        `for i in $(seq 60); do cat ${path} >/dev/null & echo $!; wait; sleep 0.05; done`,
      ]);
      let pids = "";
      reader.stdout.on("data", (chunk: Buffer) => {
        pids += chunk.toString();
      });
      const exited = new Promise<void>((resolve) => reader.on("exit", () => resolve()));
      await new Promise((r) => setTimeout(r, 600));
      await earlier.close({ keepPinned: true });
      const current = openKernelWatcher(options);
      current.onEvent((e) => e.slot === 38 && seen.push(e));
      await exited;
      const flushed = await current.flush(10_000);
      const version = current.programVersion();
      const readers = pids.split("\n").filter(Boolean).map(Number);
      const missed = readers.filter((pid) => !seen.some((e) => e.tgid === pid));
      const result = {
        // The process trackers are this build's too, and no exec went unseen across the swap.
        trackerReplaced: pinnedLinkProgram(join(pinRoot, "link_proc_exec")) !== trackerBefore,
        unnamed: seen.filter((e) => e.process.exe.source !== "exec").length,
        adopted: current.adopted,
        replacedEarlier: version.replaced?.from === earlierTag && version.tag !== earlierTag,
        pinnedIsCurrent: pinnedProgramInfo(join(pinRoot, PROGRAM_PIN))?.tag === version.tag,
        reads: readers.length,
        missed: missed.length,
        flushed,
      };
      await current.close({ keepPinned: true });
      const backlog = await flushWaitsForBacklog(h, options, path);
      h.reopen(); // the same build again: adopted, not replaced
      const again = h.watcher();
      assert.deepEqual(
        {
          ...result,
          ...backlog,
          adoptedAgain: again.adopted,
          replacedAgain: again.programVersion().replaced !== undefined,
        },
        {
          trackerReplaced: true,
          unnamed: 0,
          adopted: false,
          replacedEarlier: true,
          pinnedIsCurrent: true,
          reads: 60,
          missed: 0,
          flushed: true,
          flushedWhileHeld: false,
          deliveredWhileHeld: 0,
          flushedBacklog: true,
          backlogDelivered: 5,
          adoptedAgain: true,
          replacedAgain: false,
        },
        `missed readers ${missed}`,
      );
      return { ...result, earlierTag, tag: version.tag };
    },

    async "an upgrade to another map layout counts what the earlier version left unread, and watches with fresh maps"() {
      await h.watcher().close();
      const options = { pinRoot, burstGapMs: h.gapMs, floodBudget: 0 };
      const earlier = openKernelWatcher({ ...options, objectPath: variant("HIVE_VARIANT_LAYOUT") });
      const path = h.file("layout.txt");
      earlier.sync([h.entry(path, 39)]);
      await earlier.close({ keepPinned: true });
      // Reads while no agent runs: they wait in the earlier version's maps.
      for (let i = 0; i < 5; i++) h.run("cat", [path]);
      const current = openKernelWatcher({ ...options, replaceStalePins: true });
      const discarded = current.upgradeDiscarded;
      const watched = current.counters().watched;
      const pins = readdirSync(pinRoot);
      // The fresh maps watch what they are given, once: the earlier version's link is gone.
      current.sync([h.entry(path, 39)]);
      const after: KernelEvent[] = [];
      current.onEvent((e) => e.slot === 39 && after.push(e));
      h.run("cat", [path]);
      await current.flush(10_000);
      await current.close({ keepPinned: true });
      h.reopen();
      const result = { discarded: Number(discarded), watchedAtStart: watched, eventsAfter: after.length };
      assert.deepEqual(result, { discarded: 5, watchedAtStart: 0, eventsAfter: 1 }, `pins: ${pins}`);
      return result;
    },
  };
}
