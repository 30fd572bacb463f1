/**
 * `npm run test:arm64` (not part of `npm test`: it adds the arm64 image's assembly and an arm64
 * guest to a CI run already near its budget). The linux/arm64 agent image, on bookworm's arm64
 * kernel (6.1) under qemu-system-aarch64 (`-M virt`, TCG): the image's own tree is the guest's
 * root (shared read-only over 9p, as test/kernel/vm.ts shares the host's root with amd64
 * guests), and the image's entrypoint runs as `hive watch` on a policy trapping one file, in
 * the attach mode the agent picks there (auto) and again in kprobe mode, the one mode whose
 * argument registers differ by architecture. A read of the trapped file by another process
 * must produce one alert naming it, the reader's executable and its parent, as the kernel
 * recorded them.
 *
 * Why the image's tree rather than `ctr images import` into containerd in the guest: the image
 * holds no containerd and the host's (amd64) cannot run in the guest, and importing took about
 * two minutes of emulated decompression for the amd64 image. The tree is exactly the image's
 * layers (buildah), run with its entrypoint and working directory; containerd's part in the
 * amd64 image test is the container spec, which is architecture-neutral.
 *
 * It fails, never skips, when it cannot run: whoever runs it asked for it.
 */
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { ensureAgentImage } from "../image/agent-image.ts";
import { agentRootfs } from "../image/agent-rootfs.ts";
import { type BootResult, bootVm, findArm64Kernel, REPO_ROOT, vmUnavailable } from "../kernel/vm.ts";

const TRAPPED = "/tmp/trap/secret";
/** auto: what the agent picks on this kernel; kprobe: the registers regs.h names for arm64. */
const MODES = ["auto", "kprobe"] as const;
/**
 * What `--attach auto` picks on Debian's arm64 6.1: neither link exists there. The kernel is
 * built without CONFIG_FPROBE (no kprobe.multi), and arm64 BPF trampolines attach to kernel
 * functions only from 6.4 (ftrace direct calls; before, fentry fails with ENOTSUPP, 524). So
 * the perf-event kprobe it is, which Debian reserves to CAP_SYS_ADMIN (docs/operations.md).
 */
const EXPECTED_AUTO = "kprobe";
const GUEST_TIMEOUT_MS = 600_000;
const RESULTS = join(REPO_ROOT, ".tmp/arm64/results.json");

interface ModeResult {
  ready?: { attachMode: string; attachReason: string; watching: number };
  alerts: Array<{
    metadata: { path: string; accesses: string[] };
    process: { comm: string; exe?: string; exe_source: string; parent?: { exe?: string } };
  }>;
  exitCode?: number;
  log: string;
}

/** The guest's command: written for the image's tree (Debian minbase: sh, grep, cat, sleep). */
function guestScript(entrypoint: string[], workingDir: string): string {
  const hive = entrypoint.map((a) => `'${a}'`).join(" ");
  const wait = (test: string, tenths: number) =>
    `i=0; while ! { ${test}; } && kill -0 $pid 2>/dev/null && [ $i -lt ${tenths} ]; do sleep 0.1; i=$((i+1)); done`;
  return `up() { cut -d' ' -f1 /proc/uptime; }
echo "command $(up)" > /hive-out/timings
mkdir -p /tmp/trap && echo "the trapped file" > ${TRAPPED}
cat > /tmp/policy.yaml <<'POLICY'
apiVersion: hive-operator.com/v1alpha1
kind: HivePolicy
metadata:
  name: arm64-trap
spec:
  traps:
    - path: ${TRAPPED}
POLICY
cd '${workingDir}'
uname -m > /hive-out/uname
${hive} version --json > /hive-out/version.json 2>&1
for mode in ${MODES.join(" ")}; do
  echo "$mode start $(up)" >> /hive-out/timings
  HIVE_LOG_LEVEL=info ${hive} watch --policy /tmp/policy.yaml --no-containers --attach $mode \\
    --spool /tmp/spool-$mode --pin-root /sys/fs/bpf/hive-$mode \\
    > /hive-out/alerts-$mode.jsonl 2> /hive-out/agent-$mode.log &
  pid=$!
  ${wait(`grep -q '"msg":"ready"' /hive-out/agent-$mode.log`, 1800)}
  echo "$mode ready $(up)" >> /hive-out/timings
  # /usr/bin/cat, not the shell's applet: another executable than the shell's, exec'd.
  /usr/bin/cat ${TRAPPED} > /dev/null
  ${wait("[ -s /hive-out/alerts-$mode.jsonl ]", 600)}
  echo "$mode alert $(up)" >> /hive-out/timings
  kill -TERM $pid; wait $pid; echo "$mode exit $?" >> /hive-out/timings
done
`;
}

const outcome: {
  boot?: BootResult;
  modes: Partial<Record<(typeof MODES)[number], ModeResult>>;
  timings: Record<string, number>;
  uname?: string;
  version?: Record<string, unknown>;
  rootfs?: string;
} = { modes: {}, timings: {} };

beforeAll(async () => {
  const started = performance.now();
  const kernel = findArm64Kernel();
  const unavailable = vmUnavailable("arm64") ?? (typeof kernel === "string" ? kernel : null);
  if (unavailable !== null || typeof kernel === "string")
    throw new Error(`npm run test:arm64 cannot run here: ${unavailable}`);
  const info = await ensureAgentImage("arm64");
  const imageReady = performance.now();
  const rootfs = agentRootfs(info, "arm64-rootfs-");
  outcome.rootfs = rootfs;
  const boot = await bootVm({
    kernel,
    rootfs,
    command: guestScript(info.entrypoint, info.workingDir),
    timeoutMs: GUEST_TIMEOUT_MS,
  });
  outcome.boot = boot;
  const read = (name: string) => {
    try {
      return readFileSync(join(boot.outDir, name), "utf8");
    } catch {
      return "";
    }
  };
  const marks = new Map(
    read("timings")
      .trim()
      .split("\n")
      .map((line) => {
        const words = line.split(" ");
        return [words.slice(0, -1).join(" "), Number(words.at(-1))] as const;
      }),
  );
  outcome.timings = {
    imageSeconds: Math.round((imageReady - started) / 100) / 10,
    guestBootSeconds: marks.get("command") ?? Number.NaN,
    guestSeconds: Math.round(boot.durationMs / 100) / 10,
  };
  for (const mode of MODES) {
    const start = marks.get(`${mode} start`) ?? Number.NaN;
    outcome.timings[`${mode}ReadySeconds`] =
      Math.round(((marks.get(`${mode} ready`) ?? Number.NaN) - start) * 10) / 10;
    outcome.timings[`${mode}AlertSeconds`] =
      Math.round(
        ((marks.get(`${mode} alert`) ?? Number.NaN) - (marks.get(`${mode} ready`) ?? Number.NaN)) * 10,
      ) / 10;
    const log = read(`agent-${mode}.log`);
    const readyLine = log.split("\n").find((l) => l.includes('"msg":"ready"'));
    outcome.modes[mode] = {
      ...(readyLine ? { ready: JSON.parse(readyLine) } : {}),
      alerts: read(`alerts-${mode}.jsonl`)
        .split("\n")
        .filter((l) => l.startsWith("{"))
        .map((l) => JSON.parse(l)),
      ...(marks.has(`${mode} exit`) ? { exitCode: marks.get(`${mode} exit`) } : {}),
      log: log.slice(-3000),
    };
  }
  outcome.uname = read("uname").trim();
  const version = read("version.json");
  outcome.version = version.startsWith("{") ? JSON.parse(version) : { output: version };
  outcome.timings.totalSeconds = Math.round((performance.now() - started) / 100) / 10;
  mkdirSync(join(REPO_ROOT, ".tmp/arm64"), { recursive: true });
  const { boot: _, rootfs: __, ...figures } = outcome;
  writeFileSync(RESULTS, `${JSON.stringify({ ...figures, kernel: kernel.version }, null, 2)}\n`);
  console.log(`arm64 guest (Linux ${kernel.version}):`, outcome.timings, `(${RESULTS})`);
}, 1_800_000);

describe("the linux/arm64 agent image on an arm64 Debian kernel (qemu-system-aarch64)", () => {
  it("runs the image's arm64 Node and its arm64 program object", () => {
    expect(outcome.boot?.exitCode, outcome.boot?.output).toBe(0);
    expect(outcome.uname).toBe("aarch64");
    expect(outcome.version).toMatchObject({ program: expect.stringMatching(/^sha256:/) });
    // The image's own object (compiled in the Dockerfile's bpf stage), as the guest's root holds it;
    // `hive version` prints the hash's first 12 hex digits.
    const object = readFileSync(join(outcome.rootfs ?? "", "app/bpf/hive.arm64.bpf.o"));
    const hash = createHash("sha256").update(object).digest("hex");
    expect(outcome.version?.program).toBe(`sha256:${hash.slice(0, 12)}`);
    expect(outcome.version?.programPath).toBe("/app/bpf/hive.arm64.bpf.o");
  });

  for (const mode of MODES) {
    it(`attaches (--attach ${mode}) and alerts once for a read of the trapped file`, () => {
      const result = outcome.modes[mode];
      expect(result?.ready, result?.log).toMatchObject({ watching: 1 });
      expect(result?.ready?.attachMode).toBe(mode === "auto" ? EXPECTED_AUTO : mode);
      const alerts = result?.alerts.filter((a) => a.metadata.path === TRAPPED) ?? [];
      expect(alerts, result?.log).toHaveLength(1);
      expect(alerts[0]).toMatchObject({
        metadata: { path: TRAPPED, accesses: expect.arrayContaining(["read"]) },
        // As the kernel recorded them: the exec hook (exe), and the parent's entry from the
        // task iterator (the guest's shell predates the program).
        process: {
          comm: "cat",
          exe: "/usr/bin/cat",
          exe_source: "exec",
          parent: { exe: expect.stringMatching(/busybox$/) },
        },
      });
      expect(result?.exitCode, result?.log).toBe(0);
    });
  }
});
