/**
 * `hive watch` and `hive status` as a user runs them, on a stock Debian kernel under QEMU
 * (this project's kernel harness): one boot runs test/cli/guest/watch-scenario.ts, which
 * reads a trapped and an untrapped file from other processes while watch runs, and asks
 * status meanwhile and afterwards. The assertions here are on what it reports.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { validateAlert } from "../../api/index.ts";
import { bootVm } from "../kernel/vm.ts";
import { cliVmKernel } from "./vm-gate.ts";

interface Scenario {
  ready: boolean;
  delivered: boolean;
  readerPid: number;
  otherReaderPid: number;
  rewatched: boolean;
  replacedReaderPid: number;
  deliveredAgain: boolean;
  noticedMissing: boolean;
  rearmed: boolean;
  recreatedReaderPid: number;
  deliveredThird: boolean;
  trapped: string;
  other: string;
  watch: { code: number | null; stdout: string; stderr: string };
  received: { headers: Record<string, string>; body: string }[];
  statusText: { code: number; stdout: string; stderr: string };
  statusJson: { code: number; stdout: string; stderr: string };
  statusAfter: { code: number; stdout: string; stderr: string };
}

const kernel = cliVmKernel();

describe.runIf(kernel !== undefined)(`hive watch and hive status on Linux ${kernel?.series}`, () => {
  let s: Scenario;
  let output = "";

  beforeAll(async () => {
    if (!kernel) return;
    const result = await bootVm({
      kernel,
      command: `${process.execPath} test/cli/guest/watch-scenario.ts`,
      // Node caches compiled modules across the guest's several hive processes (emulated CPU: it matters).
      env: { NODE_COMPILE_CACHE: "/tmp/hive-node-cache" },
      // A hang guard, not a measure: beside two other guests on two cores it can take minutes more.
      timeoutMs: 900_000,
    });
    output = result.output;
    const line = output.split("\n").find((l) => l.startsWith("HIVE-SCENARIO "));
    if (!line)
      throw new Error(
        `the guest scenario printed no result (exit ${result.exitCode}):\n${output.slice(-4000)}`,
      );
    s = JSON.parse(line.slice("HIVE-SCENARIO ".length)) as Scenario;
  }, 960_000);

  it("arms the traps and says so", () => {
    expect(s.ready, s.watch.stderr).toBe(true);
  });

  it("alerts for a read of the trapped file, by the process that read it, and for nothing else", () => {
    const alerts = s.watch.stdout
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    // The first read, the rename over (a change), the read after it, the delete (a change), the
    // read after re-creation; none for other.txt.
    expect(alerts.map((a) => (a as { metadata: { change?: string } }).metadata.change ?? "read")).toEqual([
      "read",
      "replaced",
      "read",
      "deleted",
      "read",
    ]);
    const alert = alerts[0] as {
      hive_policy_name: string;
      metadata: { path: string; accesses: string[] };
      process: { tgid: number; comm: string };
      pod?: unknown;
    };
    expect(validateAlert(alert).ok).toBe(true);
    expect(alert.hive_policy_name).toBe("cli-test");
    expect(alert.metadata.path).toBe(s.trapped);
    expect(alert.metadata.accesses).toContain("read");
    expect(alert.process.tgid).toBe(s.readerPid);
    expect(alert.process.comm).toBe("cat");
    expect(alert.pod).toBeUndefined();
    expect(alerts.map((a) => (a as { process: { tgid: number } }).process.tgid)).not.toContain(
      s.otherReaderPid,
    );
  });

  it("keeps watching the path when the file is replaced by a rename over it", () => {
    expect(s.rewatched, s.watch.stderr).toBe(true);
    expect(s.deliveredAgain).toBe(true);
    const [first, replaced, second] = s.watch.stdout
      .split("\n")
      .filter(Boolean)
      .map(
        (l) =>
          JSON.parse(l) as {
            metadata: { path: string; inode: number; change?: string };
            process: { tgid: number; comm: string };
          },
      );
    // The replacement itself: the file that was trapped, replaced by mv.
    expect(replaced?.metadata.change).toBe("replaced");
    expect(replaced?.metadata.inode).toBe(first?.metadata.inode);
    expect(replaced?.process.comm).toBe("mv");
    expect(second?.metadata.path).toBe(s.trapped);
    expect(second?.process.tgid).toBe(s.replacedReaderPid);
    expect(second?.metadata.inode).not.toBe(first?.metadata.inode);
  });

  it("re-arms the trap when a deleted file is created again", () => {
    expect(s.noticedMissing, s.watch.stderr).toBe(true);
    expect(s.rearmed, s.watch.stderr).toBe(true);
    expect(s.deliveredThird).toBe(true);
    const third = JSON.parse(s.watch.stdout.split("\n").filter(Boolean)[4] ?? "{}") as {
      metadata: { path: string };
      process: { tgid: number };
    };
    expect(third.metadata.path).toBe(s.trapped);
    expect(third.process.tgid).toBe(s.recreatedReaderPid);
  });

  it("posts the same alerts to the callback", () => {
    expect(s.delivered).toBe(true);
    expect(s.received).toHaveLength(5);
    const posted = JSON.parse(s.received[0]?.body ?? "{}") as { id: string; process: { tgid: number } };
    const printed = JSON.parse(s.watch.stdout.split("\n")[0] ?? "{}") as { id: string };
    expect(posted.id).toBe(printed.id);
    expect(s.received[0]?.headers["hive-alert-id"]).toBe(posted.id);
  });

  it("shows the trap in hive status while watch runs", () => {
    expect(s.statusText.code, s.statusText.stderr).toBe(0);
    expect(s.statusText.stdout).toMatch(/\/sys\/fs\/bpf\/hive-standalone — hive watch pid \d+/);
    // Debian's 6.1 has no kprobe.multi links (CONFIG_FPROBE off): auto attaches by fentry, and says why.
    expect(s.statusText.stdout).toMatch(
      /program {3}handle_inode_permission_fentry \(id \d+\), attached by fentry to inode_permission/,
    );
    expect(s.statusText.stdout).toMatch(/why {7}BPF trampoline: this kernel has no kprobe\.multi links/);
    expect(s.statusText.stdout).toMatch(
      /file\s+\S+\s+\d+\s+read,write,exec,append,open\s+cli-test \S+trapped\.txt \(host\)/,
    );
    const [root] = JSON.parse(s.statusJson.stdout) as {
      attachMode: string;
      watched: { kind: string; traps: { policy: string; path: string }[] }[];
      counters: { lost: number };
    }[];
    expect(root?.attachMode).toBe("fentry");
    const file = root?.watched.find((w) => w.kind === "file");
    expect(file?.traps).toEqual([expect.objectContaining({ policy: "cli-test", path: s.trapped })]);
    expect(root?.counters.lost).toBe(0);
  });

  it("detaches cleanly on Ctrl-C: exit 0, nothing left loaded", () => {
    expect(s.watch.code).toBe(0);
    expect(s.watch.stderr).toMatch(/"msg":"detached"/);
    expect(s.statusAfter.code).toBe(4);
    expect(s.statusAfter.stderr).toMatch(/^hive status: NotLoaded: no Hive program is loaded on this kernel/);
  });
});
