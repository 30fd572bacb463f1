/**
 * The agent as a cluster runs it: the image built from Dockerfile, started under containerd +
 * runc with the container spec of the rendered DaemonSet (capabilities, seccomp
 * RuntimeDefault, read-only root, host PID namespace, mounts, downward-API environment,
 * service-account token, args appended to the entrypoint), on each stock kernel under QEMU,
 * as `hive agent` against the API stand-in. A read of the trapped file inside a real
 * container must reach the callback. Needs root and qemu; locally a missing prerequisite
 * skips loudly, under CI=true it fails.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { AGENT_CAPABILITIES } from "../../component/builders/daemonset.ts";
import { isHiveError } from "../../runtime/errors.ts";
import { type BootResult, bootVm, findKernels, REPO_ROOT, vmUnavailable } from "../kernel/vm.ts";
import { ensureAgentImage } from "./agent-image.ts";
import { agentRootfs, type BuiltImage } from "./agent-rootfs.ts";
import { capabilityMask } from "./ctr-run-args.ts";

const SERIES = ["6.12", "6.1", "5.10"] as const;
/** What `--attach auto` must choose with the DaemonSet's capabilities (no SYS_ADMIN). */
const EXPECTED_ATTACH: Record<(typeof SERIES)[number], string> = {
  "6.12": "kprobe.multi",
  "6.1": "fentry",
  "5.10": "fentry",
};
const isCI = process.env.CI === "true";
const unavailable = vmUnavailable();
const { found } = findKernels();
const wanted = process.env.HIVE_KERNELS?.split(",") ?? [...SERIES];
const INFO = join(REPO_ROOT, ".tmp/image/hive-agent.json");

interface GuestResult {
  ok: boolean;
  error?: string;
  capabilities: string[];
  process: { capEff: string; noNewPrivs: string; seccomp: string; rootReadOnly: boolean };
  alert: Record<string, unknown> & { metadata: { path: string }; process: { comm: string } };
  /** `hive status --json`: one entry per pin root. */
  status: Array<{ attachMode: string; attachReason: string }>;
  readyz: string;
  timings: Record<string, number>;
  agentLogTail: string;
}

interface Outcome {
  result?: GuestResult;
  boot?: BootResult;
  failure?: unknown;
}

/**
 * One guest per kernel, all booted at once: each keeps one emulated CPU busy for minutes, and
 * one after the other they would be the longest part of the suite.
 */
const GUEST_TIMEOUT_MS = 1_500_000;
async function runOn(kernel: (typeof found)[number], rootfs: Promise<string>): Promise<Outcome> {
  const outcome: Outcome = {};
  try {
    outcome.boot = await bootVm({
      kernel,
      command: `export PATH='${join(REPO_ROOT, "node_modules/.bin")}':$PATH\nnode test/image/guest/agent-in-container.ts`,
      env: {
        HIVE_IMAGE_INFO: INFO,
        HIVE_IMAGE_ROOTFS: await rootfs,
        // The guest gives up first, naming the step it was in; the host's limit is for a dead guest.
        HIVE_GUEST_DEADLINE_MS: String(GUEST_TIMEOUT_MS - 180_000),
      },
      timeoutMs: GUEST_TIMEOUT_MS,
      memoryMb: 3072,
    });
    const file = join(outcome.boot.outDir, "image-results.json");
    if (existsSync(file)) outcome.result = JSON.parse(readFileSync(file, "utf8")) as GuestResult;
    console.log(
      `Linux ${kernel.series}: image run took ${Math.round(outcome.boot.durationMs / 1000)} s`,
      outcome.result?.timings,
    );
  } catch (error) {
    outcome.failure = error;
  }
  return outcome;
}

const outcomes = new Map<string, Promise<Outcome>>();
beforeAll(async () => {
  const runnable = SERIES.filter(
    (s) => wanted.includes(s) && !unavailable && found.some((k) => k.series === s),
  );
  if (runnable.length === 0) return;
  const rootfs = ensureAgentImage().then(() =>
    agentRootfs(JSON.parse(readFileSync(INFO, "utf8")) as BuiltImage),
  );
  rootfs.catch(() => undefined); // reported by every kernel's outcome
  for (const series of runnable) {
    const kernel = found.find((k) => k.series === series);
    if (kernel) outcomes.set(series, runOn(kernel, rootfs));
  }
  await Promise.all(outcomes.values());
}, 2_400_000);

for (const series of SERIES) {
  if (!wanted.includes(series)) continue;
  const kernel = found.find((k) => k.series === series);
  const reason =
    unavailable ?? (kernel ? null : `kernel ${series} not fetched (sh test/kernel/fetch-kernels.sh)`);
  if (reason && !isCI)
    console.warn(`!!! agent image on Linux ${series} SKIPPED: ${reason} (under CI=true this fails)`);
  const runIt = reason && !isCI ? it.skip : it;

  describe(`the agent image with the DaemonSet's container spec, on Linux ${series}`, () => {
    let outcome: Outcome = {};
    beforeAll(async () => {
      outcome = (await outcomes.get(series)) ?? {};
    });

    const guest = (): GuestResult => {
      if (reason) throw new Error(`cannot run: ${reason}`);
      const { result, boot, failure } = outcome;
      // The hint carries the console and output tails: put them where the test report shows them.
      if (failure) throw isHiveError(failure) ? new Error(failure.describe(), { cause: failure }) : failure;
      if (!result) throw new Error(`no result from the guest; output tail:\n${boot?.output.slice(-4000)}`);
      if (!result.ok) throw new Error(`${result.error}\nagent log tail:\n${result.agentLogTail}`);
      return result;
    };

    runIt("runs with exactly the spec's capabilities, no_new_privs, seccomp and a read-only root", () => {
      const r = guest();
      expect(r.capabilities.sort()).toEqual([...AGENT_CAPABILITIES].sort());
      expect(BigInt(`0x${r.process.capEff}`)).toBe(capabilityMask(AGENT_CAPABILITIES));
      expect(r.process.noNewPrivs).toBe("1");
      expect(r.process.seccomp).toBe("2"); // SECCOMP_MODE_FILTER: the runtime's default profile
      expect(r.process.rootReadOnly).toBe(true);
    });

    runIt(`attaches by ${EXPECTED_ATTACH[series]} without SYS_ADMIN and says why in hive status`, () => {
      const r = guest();
      expect(r.readyz).toContain("[+]kernel-program ok");
      const root = r.status[0];
      expect(root?.attachMode).toBe(EXPECTED_ATTACH[series]);
      expect(root?.attachReason).toMatch(/CAP_BPF \+ CAP_PERFMON/);
    });

    runIt("alerts the callback when a process in another container reads the trapped file", () => {
      const r = guest();
      expect(r.alert).toMatchObject({
        hive_policy_name: expect.any(String),
        metadata: { path: "/etc/hive-secret" },
        pod: { name: "web", namespace: "default", container: { id: "containerd://web-app", name: "app" } },
        node: { name: "node-image" },
        process: {
          comm: "busybox", // /bin/busybox cat: the kernel reports the executed file's name
          // Tracked in the kernel with the DaemonSet's capabilities: the path inside the container.
          exe: "/bin/busybox",
          exe_source: "exec",
        },
      });
    });
  });
}
