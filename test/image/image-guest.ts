/**
 * One run of the agent image in a guest: the image under containerd + runc with the rendered
 * DaemonSet's container spec, on a stock kernel under QEMU, against a real kube-apiserver of its
 * own on the host (guest/agent-in-container.ts says what the guest does). Shared by the image test
 * (test/image/agent-on-kernels.test.ts) and the idle-memory bench (bench/idle-memory.ts).
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { type GuestApi, startGuestApi } from "../cluster/guest-api.ts";
import { type BootResult, bootVm, type findKernels, REPO_ROOT, WORK_DIR } from "../kernel/vm.ts";
import { ensureAgentImage } from "./agent-image.ts";
import { agentRootfs, type BuiltImage } from "./agent-rootfs.ts";
import type { AgentMemory } from "./guest/agent-memory.ts";
import type { LifecycleResult } from "./guest/lifecycle.ts";

type Kernel = ReturnType<typeof findKernels>["found"][number];

const INFO = join(REPO_ROOT, ".tmp/image/hive-agent.json");

/** The image built (or found built) and unpacked for the guests; one for every guest of a run. */
export function prepareAgentRootfs(): Promise<string> {
  return ensureAgentImage().then(() => agentRootfs(JSON.parse(readFileSync(INFO, "utf8")) as BuiltImage));
}

export interface GuestResult {
  ok: boolean;
  error?: string;
  capabilities: string[];
  process: { capEff: string; noNewPrivs: string; seccomp: string; rootReadOnly: boolean };
  alert: Record<string, unknown> & { metadata: { path: string }; process: { comm: string } };
  /** `hive status --json`: one entry per pin root. */
  status: Array<{ attachMode: string; attachReason: string }>;
  readyz: string;
  timings: Record<string, number>;
  /** The idle agent's memory (guest/agent-memory.ts): what the DaemonSet's request is set from. */
  memory?: AgentMemory;
  agentLogTail: string;
  lifecycle?: LifecycleResult;
}

export interface Outcome {
  result?: GuestResult;
  boot?: BootResult;
  failure?: unknown;
  /** Agent requests the API server refused (its audit log), when there were any. */
  refused?: string;
}

/** A dead guest's limit; a live one gives up three minutes before, naming the step it was in. */
const GUEST_TIMEOUT_MS = 1_500_000;

/** Boots one guest on `kernel` (its own API server) and returns what it reported; never throws. */
export async function runImageGuest(
  kernel: Kernel,
  rootfs: Promise<string>,
  options: { lifecycle: boolean },
): Promise<Outcome> {
  const outcome: Outcome = {};
  let api: GuestApi | undefined;
  try {
    const rootfsDir = await rootfs;
    // The guest's cluster, started once the image is there: each guest has its own.
    api = await startGuestApi();
    const outDir = join(WORK_DIR, `image-${process.pid}-${kernel.series}`);
    const booting = bootVm({
      kernel,
      outDir,
      qemuArgs: api.qemuArgs,
      command: `export PATH='${join(REPO_ROOT, "node_modules/.bin")}':$PATH\nnode test/image/guest/agent-in-container.ts`,
      env: {
        ...api.env,
        HIVE_IMAGE_INFO: INFO,
        HIVE_IMAGE_ROOTFS: rootfsDir,
        // The guest gives up first, naming the step it was in; the host's limit is for a dead guest.
        HIVE_GUEST_DEADLINE_MS: String(GUEST_TIMEOUT_MS - 180_000),
        HIVE_IMAGE_LIFECYCLE: options.lifecycle ? "1" : "0",
      },
      timeoutMs: GUEST_TIMEOUT_MS,
      memoryMb: 3072,
    });
    // bootVm made outDir before it returned: the guest's requests to the host land there.
    const desk = api.serve(outDir);
    try {
      outcome.boot = await booting;
    } finally {
      desk.stop();
    }
    try {
      api.assertNoRefusals();
    } catch (error) {
      outcome.refused = (error as Error).message;
    }
    const file = join(outcome.boot.outDir, "image-results.json");
    if (existsSync(file)) outcome.result = JSON.parse(readFileSync(file, "utf8")) as GuestResult;
    console.log(
      `Linux ${kernel.series}: image run took ${Math.round(outcome.boot.durationMs / 1000)} s`,
      outcome.result?.timings,
    );
    console.log(`Linux ${kernel.series}: the idle agent's memory`, JSON.stringify(outcome.result?.memory));
  } catch (error) {
    outcome.failure = error;
  } finally {
    await api?.stop();
  }
  return outcome;
}
