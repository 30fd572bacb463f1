/**
 * Kernel cases about durability: an event's ring space is given back only once its alert is
 * on disk or delivered. Run by cases.ts in the guest, with the spooling agent as the process
 * that is SIGKILLed.
 */
import assert from "node:assert/strict";
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startReceiver } from "../../alerts/receiver.ts";
import { mountSmallTmpfs } from "../../alerts/tmpfs.ts";
import type { KernelCaseName } from "./case-names.ts";
import type { GuestHarness } from "./process-cases.ts";

type DurabilityCaseName = Extract<
  KernelCaseName,
  "a spool whose disk is full keeps its alerts' events in the ring: a killed agent leaves them to the next, which delivers each access once"
>;

const SLOT = 36;

interface AgentState {
  held: boolean;
  paused: boolean;
  usedBytes: number;
  lost: string;
  dropped: Record<string, number>;
}

/** The spooling agent as a child process, with what it printed. */
function startAgent(args: string[]) {
  const child: ChildProcess & { stdout: NodeJS.ReadableStream; stdin: NodeJS.WritableStream } = spawn(
    process.execPath,
    [join(import.meta.dirname, "spooling-agent.ts"), ...args],
    { stdio: ["pipe", "pipe", "inherit"] },
  ) as never;
  let output = "";
  child.stdout.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()));
  const until = async (what: string, done: () => boolean, timeoutMs = 60_000) => {
    const deadline = Date.now() + timeoutMs;
    while (!done() && child.exitCode === null && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 20));
    assert.ok(done(), `${what} (the agent's output: ${JSON.stringify(output)})`);
  };
  return {
    until,
    ready: () => output.includes("ready\n"),
    handled: (tgid: number) => output.includes(`event ${tgid}\n`),
    async state(): Promise<AgentState> {
      const before = output.length;
      child.stdin.write("state\n");
      await until("the agent did not report its state", () => output.slice(before).includes("\n"));
      const line = output.slice(before).split("\n")[0] ?? "";
      return JSON.parse(line.replace(/^state /, "")) as AgentState;
    },
    async kill() {
      child.kill("SIGKILL");
      await exited;
    },
  };
}

export function durabilityCases(
  h: GuestHarness,
  pinRoot: string,
): Record<DurabilityCaseName, () => Promise<Record<string, unknown>>> {
  return {
    async "a spool whose disk is full keeps its alerts' events in the ring: a killed agent leaves them to the next, which delivers each access once"() {
      const watcher = h.watcher();
      const path = h.file("durable.txt");
      watcher.sync([h.entry(path, SLOT)]);
      await watcher.close({ keepPinned: true });
      execFileSync("ip", ["link", "set", "lo", "up"]); // the callback listens on loopback
      const disk = mountSmallTmpfs(128);
      const receiver = await startReceiver();
      const filler = join(disk.dir, "filler");
      /** Fills the disk to the last byte: every write of the spool fails with ENOSPC. */
      const fill = () => {
        const block = Buffer.alloc(4096);
        for (let i = 0; ; i++) {
          try {
            writeFileSync(`${filler}-${i}`, block);
          } catch {
            break;
          }
        }
      };
      const agentArgs = (maxUnwritten: number) => [
        pinRoot,
        String(h.gapMs),
        String(SLOT),
        join(disk.dir, "spool"),
        receiver.url,
        String(maxUnwritten),
      ];
      const pidOf = (body: string) => (JSON.parse(body) as { process: { tgid: number } }).process.tgid;
      const deliveredTo = (tgids: number[]) =>
        tgids.map((tgid) => receiver.accepted.filter((r) => pidOf(r.body) === tgid).length);
      try {
        // 1. Disk full, callback down, memory for two or three alerts (reading pauses at half).
        await receiver.down();
        let agent = startAgent(agentArgs(2 * 1024));
        await agent.until("the agent never got ready", agent.ready);
        fill();
        // One read at a time until reading pauses: each batch is handled before the next is read,
        // so it pauses right after the alert that fills half the memory (the first or the second).
        const first: number[] = [];
        while (first.length < 4 && !(await agent.state()).paused) {
          const tgid = h.run("cat", [path]);
          first.push(tgid);
          await agent.until("the agent did not handle a read made before reading paused", () =>
            agent.handled(tgid),
          );
        }
        // Reading is paused now: these wait in the ring, unread.
        const second: number[] = [];
        for (let i = 0; i < 3; i++) second.push(h.run("cat", [path]));
        await new Promise((r) => setTimeout(r, 20 * h.gapMs + 1000));
        const undecided = [...first, ...second];
        const full = await agent.state();
        const handledBeforeKill = undecided.filter((t) => agent.handled(t)).length;
        assert.deepEqual(
          {
            held: full.held,
            paused: full.paused,
            dropped: full.dropped,
            secondHandled: second.filter((t) => agent.handled(t)).length,
          },
          { held: true, paused: true, dropped: {}, secondHandled: 0 },
          `the ring must be held and its reading paused, nothing dropped (state ${JSON.stringify(full)})`,
        );
        await agent.kill();

        // 2. Room again and the callback up: the next agent delivers every read once.
        for (let i = 0; ; i++) {
          try {
            rmSync(`${filler}-${i}`);
          } catch {
            break;
          }
        }
        await receiver.up();
        agent = startAgent(agentArgs(1024 * 1024));
        await agent.until("the second agent never got ready", agent.ready);
        await receiver.waitForDistinct(undecided.length, 60_000).catch(() => undefined);
        assert.deepEqual(
          deliveredTo(undecided),
          undecided.map(() => 1),
          `each read not delivered exactly once after the restart (tgids ${undecided})`,
        );

        // 3. Disk full again, callback up: delivered from memory, which releases the ring.
        fill();
        const decided: number[] = [];
        for (let i = 0; i < 3; i++) decided.push(h.run("cat", [path]));
        await receiver.waitForDistinct(undecided.length + decided.length, 60_000).catch(() => undefined);
        await new Promise((r) => setTimeout(r, 20 * h.gapMs + 1000));
        // Released: nothing of them is left in the ring for a next agent to deliver again.
        const delivered = await agent.state();
        assert.deepEqual(
          { held: delivered.held, usedBytes: delivered.usedBytes },
          { held: false, usedBytes: 0 },
          `the ring keeps what was delivered: ${JSON.stringify(delivered)}`,
        );
        await agent.kill();
        assert.deepEqual(
          deliveredTo([...undecided, ...decided]),
          [...undecided, ...decided].map(() => 1),
          "a read delivered twice, or never",
        );
        return {
          reads: undecided.length + decided.length,
          handledBeforeKill,
          ringPaused: full.paused,
          ringUsedBytes: full.usedBytes,
        };
      } finally {
        await receiver.close();
        disk.unmount();
        h.reopen(); // adopts what the killed agents left pinned
      }
    },
  };
}
