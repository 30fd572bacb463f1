/**
 * Standalone mode follows the containers of a real containerd (+ runc) as they start and stop,
 * with no SIGHUP: the kernel map is the stand-in here (this machine cannot attach the program;
 * the kernel suite's standalone case arms the real one), and everything up to it is real —
 * containerd's event stream, its lists, the in-root resolution through /proc/PID/root.
 * Also: the stream lost when containerd is killed, resubscribed once it is back, and the
 * containers re-listed then (a container that stopped meanwhile is forgotten).
 */
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { renderFollowing } from "../../runtime/cli/commands/status.ts";
import type { KernelWatcher, WatchEntry } from "../../runtime/kernel/contract.ts";
import { type ContainerLister, openContainerLister } from "../../runtime/standalone/local-containers.ts";
import { parsePolicyText } from "../../runtime/standalone/policy-files.ts";
import { type Standalone, startStandalone } from "../../runtime/standalone/standalone.ts";
import type { WatchTableFile } from "../../runtime/standalone/watch-table-file.ts";
import { captureLogger } from "../alerts/fixtures.ts";
import { type Containerd, containerSuiteGate, startContainerd } from "../containers/containerd-harness.ts";

const run = containerSuiteGate();

/** A kernel watcher that only keeps the map's entries (what sync() was last given). */
function mapOnlyWatcher() {
  let entries: readonly WatchEntry[] = [];
  const watcher = {
    attachMode: "kprobe",
    sync: (next: readonly WatchEntry[]) => {
      entries = next;
      return { notWatched: [] };
    },
    onEvent: () => undefined,
    counters: () => ({ events: 0n, lost: 0n, watched: entries.length }),
    ancestors: () => [],
    close: async () => undefined,
  } as unknown as KernelWatcher;
  return { watcher, entries: () => entries };
}

async function until(what: string, check: () => boolean, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe.runIf(run)("standalone mode follows containerd's containers", () => {
  let containerd: Containerd;
  let lister: ContainerLister;
  let standalone: Standalone;
  const map = mapOnlyWatcher();
  const log = captureLogger();
  const tableDir = mkdtempSync(join(tmpdir(), "hive-follow-table-"));
  const tableFile = join(tableDir, "hive-standalone.watch-table.json");
  /** What `hive status` shows of the event stream, read from the table as it does. */
  const statusLine = () => {
    try {
      const table = JSON.parse(readFileSync(tableFile, "utf8")) as WatchTableFile;
      return table.containers ? renderFollowing(table.containers) : "";
    } catch {
      return ""; // between the write and the rename of the next table
    }
  };

  /** The file key of /etc/shadow in a running container, as the kernel map must hold it. */
  const shadowOf = async (id: string) => {
    const c = (await lister.list()).find((x) => x.id === id);
    if (!c) throw new Error(`${id} is not running`);
    const st = statSync(`/proc/${c.pid}/root/etc/shadow`, { bigint: true });
    return st.ino;
  };
  const armed = (ino: bigint) => map.entries().some((e) => e.kind === "file" && e.key.ino === ino);
  const start = (id: string) =>
    containerd.start(id, containerd.makeRootfs(id, { "etc/shadow": `${id} secret\n` }));

  beforeAll(async () => {
    containerd = await startContainerd();
    const opened = await openContainerLister({ socket: containerd.socket });
    if (!opened) throw new Error("the test containerd's socket is missing");
    lister = opened;
    const { documents, problems } = parsePolicyText(
      "web.yaml",
      `apiVersion: hive-operator.com/v1alpha1
kind: HivePolicy
metadata:
  name: web-shadow
spec:
  traps:
    - path: /etc/shadow
      match:
        container-name: "web-.*"
`,
    );
    expect(problems).toEqual([]);
    // No container runs yet: the trap waits for one instead of failing.
    standalone = await startStandalone({
      documents,
      watcher: map.watcher,
      alerts: { handle: () => undefined },
      logger: log.logger,
      kernelId: "test",
      listContainers: () => lister.list(),
      containerEvents: lister.events(),
      follow: { backoff: { baseMs: 100, maxMs: 400 }, connectTimeoutMs: 500 },
      watchTableFile: tableFile,
    });
    await until("the event stream is connected", () => standalone.following?.connected === true);
  }, 60_000);

  afterAll(async () => {
    await standalone?.close();
    lister?.close();
    await containerd?.stop();
    rmSync(tableDir, { recursive: true, force: true });
  });

  it("arms the trap of a container started later at once, without SIGHUP, and forgets it when it stops", async () => {
    expect(map.entries()).toEqual([]);
    // A matching container whose process exits at once: its start races the plan, which must
    // come through it (an error as a value at most), and keep following.
    await containerd.start("web-follow-quick", containerd.makeRootfs("web-follow-quick"), [
      "/bin/busybox",
      "true",
    ]);
    await start("web-follow-1");
    await start("db-follow-1");
    const web = await shadowOf("web-follow-1");
    await until("web-follow-1's /etc/shadow is in the kernel map", () => armed(web));
    // Only the container the trap matches.
    expect(standalone.plan.files.map((f) => f.target.kind === "container" && f.target.container.id)).toEqual([
      "web-follow-1",
    ]);
    const watching = log.lines.find((r) => r.msg === "watching" && String(r.target).includes("web-follow-1"));
    expect(watching?.reason).toMatch(/task started: default\/web-follow-1/);
    expect(typeof watching?.sinceTaskStartMs).toBe("number");

    expect(log.lines.filter((r) => r.level === "error")).toEqual([]);
    await containerd.remove("web-follow-1");
    await until(
      "web-follow-1's entries are removed",
      () => !armed(web) && standalone.plan.files.length === 0,
    );
    expect(
      log.lines.some((r) => r.msg === "not watching any more" && String(r.target).includes("web-follow-1")),
    ).toBe(true);
  }, 60_000);

  it("resubscribes when containerd restarts and re-lists: a container stopped meanwhile is forgotten, one started after is armed", async () => {
    await start("web-follow-2");
    const web2 = await shadowOf("web-follow-2");
    await until("web-2 is armed", () => armed(web2));
    const pid = (await lister.list()).find((c) => c.id === "web-follow-2")?.pid ?? 0;

    await containerd.kill();
    await until("the stream is seen lost", () => standalone.following?.connected === false);
    await until("hive status shows the stream disconnected", () => /DISCONNECTED/.test(statusLine()));
    // While containerd is down, web-2's process ends: no event reaches Hive for it now.
    process.kill(pid, "SIGKILL");
    await containerd.restart();
    await until("the stream is connected again", () => standalone.following?.connected === true);
    expect(standalone.following?.resubscribes).toBe(1);
    await until("hive status shows the stream connected again", () =>
      /followed on containerd's event stream, connected since .* resubscribed 1 times/.test(statusLine()),
    );
    await until("web-2 is forgotten after the re-list", () => !armed(web2));

    await start("web-follow-3");
    const web3 = await shadowOf("web-follow-3");
    await until("web-3 is armed on the new stream", () => armed(web3));
    expect(log.lines.some((r) => r.msg === "container event stream lost: resubscribing")).toBe(true);
  }, 90_000);
});
