/**
 * The kernel suite: boots a stock Debian kernel once (test/kernel/vm.ts), runs every case of
 * test/kernel/guest/cases.ts inside against the real program and loader, and reports each case
 * here as its own test. One test file per kernel (kernel-6.1.test.ts, kernel-6.12.test.ts,
 * kernel-5.10.test.ts: 6.1, 6.12 and 5.10 cover the three inode_permission signatures), so that
 * their guests run on as many workers as there are cores. The cases that need a Kubernetes API
 * server (API_SERVER_CASES) get a real one on the host, one per file, which the guest reaches at its
 * one forwarded address (test/cluster/guest-api.ts); its audit log is read after the guest is done.
 * Needs root and qemu (and socat for the API cases); kernels come from test/kernel/fetch-kernels.sh.
 * Locally a missing prerequisite skips loudly; under CI=true it fails.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { type GuestApi, guestApiUnavailable, startGuestApi } from "../cluster/guest-api.ts";
import { buildAllowImage } from "../fixtures/allow-image.ts";
import {
  API_SERVER_CASES,
  excludedOn,
  KERNEL_CASES,
  type KernelCaseName,
  type KernelCaseResult,
} from "./guest/case-names.ts";
import { type BootResult, bootVm, findKernels, REPO_ROOT, vmUnavailable, WORK_DIR } from "./vm.ts";

const isCI = process.env.CI === "true";
const unavailable = vmUnavailable();
const apiUnavailable = guestApiUnavailable();
const { found } = findKernels();
/** HIVE_CASES="name|name" runs only the cases whose names contain one of these (while developing one). */
const only = process.env.HIVE_CASES?.split("|");
/** The cases the guest runs on `series` (its own filter, guest/cases.ts, is the same). */
const casesOn = (series: string): KernelCaseName[] =>
  KERNEL_CASES.filter((name) => (!only || only.some((o) => name.includes(o))) && !excludedOn(name, series));

/**
 * The allow cases' container image and the static hive-attacker (the flood case's decoy), built on
 * the host: the guest sees them through the shared root. Each kernel's file builds its own, in a
 * directory of its own, as the files run side by side.
 */
const allowImageEnv = (series: string) => {
  const allowImage = buildAllowImage(join(WORK_DIR, `allow-image-${series}`));
  return { HIVE_ALLOW_IMAGE: allowImage.archive, HIVE_ATTACKER: allowImage.attackerPath };
};
/** The upgrade cases' "earlier versions" of the program (bpf/build.sh HIVE_BPF_VARIANT). */
const variantEnv = (series: string) => {
  const build = (variant: string) => {
    const out = join(WORK_DIR, `hive-${variant}-variant-${series}.bpf.o`);
    execFileSync("sh", [join(REPO_ROOT, "bpf/build.sh")], {
      env: { ...process.env, HIVE_BPF_VARIANT: variant, HIVE_BPF_OUT: out },
      stdio: "pipe",
    });
    return out;
  };
  return { HIVE_VARIANT_PROGRAM: build("program"), HIVE_VARIANT_LAYOUT: build("layout") };
};

/** Defines the suite of one kernel series (its test file names it: run that file for one kernel). */
export function kernelSuite(series: "6.1" | "6.12" | "5.10"): void {
  const kernel = found.find((k) => k.series === series);
  const reason =
    unavailable ?? (kernel ? null : `kernel ${series} not fetched (sh test/kernel/fetch-kernels.sh)`);
  if (reason && !isCI) {
    console.warn(`!!! kernel suite on Linux ${series} SKIPPED: ${reason} (under CI=true this fails)`);
  }
  const runIt = reason && !isCI ? it.skip : it;

  describe(`on Linux ${series}`, () => {
    let boot: BootResult | undefined;
    let results = new Map<string, KernelCaseResult>();
    let bootError: unknown;
    /** Agent requests the API server refused, from its audit log (fails the API cases). */
    let refused: string | undefined;

    beforeAll(async () => {
      if (reason || !kernel) return;
      let api: GuestApi | undefined;
      try {
        const apiCases = casesOn(series).filter((name) => API_SERVER_CASES.includes(name));
        if (apiCases.length > 0 && !apiUnavailable) api = await startGuestApi();
        const outDir = join(WORK_DIR, `kernel-${process.pid}-${series}`);
        const booting = bootVm({
          kernel,
          outDir,
          ...(api ? { qemuArgs: api.qemuArgs } : {}),
          command: `export PATH='${join(REPO_ROOT, "node_modules/.bin")}':$PATH\nnode test/kernel/guest/cases.ts`,
          // HIVE_CASES="name|name" runs only those cases (while developing one; the rest then fail as not run).
          env: {
            // Node caches compiled modules across the guest's agents and resolver
            // threads (emulated CPU: compiling the same modules again is most of a start).
            NODE_COMPILE_CACHE: "/tmp/hive-node-cache",
            ...api?.env,
            ...allowImageEnv(series),
            ...variantEnv(series),
            ...(process.env.HIVE_CASES ? { HIVE_CASES: process.env.HIVE_CASES } : {}),
            ...(process.env.HIVE_ALL_CASES ? { HIVE_ALL_CASES: process.env.HIVE_ALL_CASES } : {}),
            // How many containers the image-layer case starts (its create-to-armed measurement).
            ...(process.env.HIVE_LAYER_READERS ? { HIVE_LAYER_READERS: process.env.HIVE_LAYER_READERS } : {}),
          },
          // A hang guard, not a measure: beside the README end-to-end guest and the per-file
          // control planes, a guest under emulation on two cores can take twice its usual ten minutes.
          timeoutMs: 1_200_000,
        });
        // bootVm made outDir before it returned: the guest's requests to the host land there.
        const desk = api?.serve(outDir);
        try {
          boot = await booting;
        } finally {
          desk?.stop();
        }
        const file = join(boot.outDir, "results.json");
        if (existsSync(file)) {
          const list = JSON.parse(readFileSync(file, "utf8")) as KernelCaseResult[];
          results = new Map(list.map((r) => [r.name, r]));
        }
        console.log(`Linux ${series}: guest run took ${Math.round(boot.durationMs / 1000)} s`);
        try {
          api?.assertNoRefusals();
        } catch (error) {
          refused = (error as Error).message;
        }
      } catch (error) {
        bootError = error;
      } finally {
        await api?.stop();
      }
    }, 1_260_000);

    for (const name of KERNEL_CASES) {
      // A case a kernel cannot run (CASE_EXCLUSIONS says why) is not a test on that kernel:
      // a skipped test could never fail.
      if (excludedOn(name, series)) continue;
      const needsApi = API_SERVER_CASES.includes(name);
      if (needsApi && apiUnavailable && !reason && !isCI)
        console.warn(
          `!!! "${name}" on Linux ${series} SKIPPED: ${apiUnavailable} (under CI=true this fails)`,
        );
      const runCase = needsApi && apiUnavailable && !isCI ? it.skip : runIt;
      runCase(name, () => {
        if (reason) throw new Error(`cannot run the kernel suite: ${reason}`);
        if (needsApi && apiUnavailable) throw new Error(`cannot run this case: ${apiUnavailable}`);
        if (bootError) throw bootError;
        const result = results.get(name);
        if (!result) {
          throw new Error(
            `no result from the guest (exit ${boot?.exitCode}); guest output tail:\n${boot?.output.slice(-4000)}`,
          );
        }
        expect(result.error ?? "", `guest failure on Linux ${series}`).toBe("");
        expect(result.ok).toBe(true);
        if (needsApi) expect(refused ?? "", "the API server's audit log").toBe("");
      });
    }
  });
}
