/**
 * The readiness checks of this node's kernel side: the program loaded and read (its ring drain
 * alive, its ring neither held nor paused for the alerts' sake, the parent hook attached where
 * the kernel needs it), the watch map not full, no events lost lately, and the loader routing.
 * Each failing check names what fails; /readyz?verbose lists them.
 */
import type { LoaderController } from "../controllers/loader.ts";
import type { KernelWatcher } from "../kernel/contract.ts";
import type { Health } from "../metrics/health.ts";
import type { NodeAgent } from "./node-agent.ts";

/** Events lost this recently keep readiness failing (the kubelet probes every 10 s or so). */
export const LOSS_WINDOW_MS = 60_000;

export interface KernelReadinessSources {
  kernel: () => KernelWatcher | undefined;
  loader: () => LoaderController | undefined;
  /** Why this node, elected loader, could not load the program. */
  loaderFailure: () => string | undefined;
  now?: () => number;
}

export function addKernelReadinessChecks(health: Health, sources: KernelReadinessSources): void {
  const now = sources.now ?? Date.now;
  health.addReadinessCheck("kernel-program", () => {
    const failure = sources.loaderFailure();
    if (failure !== undefined) return { ok: false, message: failure };
    return sources.kernel()?.health?.() ?? { ok: true };
  });
  health.addReadinessCheck("watch-map", () => {
    const notWatched = sources.kernel()?.counters().notWatched ?? 0;
    return notWatched === 0
      ? { ok: true }
      : {
          ok: false,
          message: `the kernel watch map is full: ${notWatched} files not watched (watch fewer files or raise --watch-capacity)`,
        };
  });
  let seenLost: bigint | undefined;
  let lostSince = 0n;
  let lastLossMs = Number.NEGATIVE_INFINITY;
  health.addReadinessCheck("kernel-losses", () => {
    const lost = sources.kernel()?.counters().lost;
    if (lost === undefined) return { ok: true };
    if (seenLost !== undefined && lost > seenLost) {
      if (now() - lastLossMs >= LOSS_WINDOW_MS) lostSince = 0n;
      lostSince += lost - seenLost;
      lastLossMs = now();
    }
    seenLost = lost;
    return now() - lastLossMs < LOSS_WINDOW_MS
      ? {
          ok: false,
          message: `the kernel ring buffer lost ${lostSince} events in the last minute (hive_kernel_events_lost_total)`,
        }
      : { ok: true };
  });
  health.addReadinessCheck("loader-routing", () =>
    sources.loader()?.holding()
      ? {
          ok: false,
          message:
            "kernel events wait unrouted in the ring buffer until the first HiveData list (no routing snapshot on this node)",
        }
      : { ok: true },
  );
}

/** Every readiness check of a node agent (what main.ts serves as /readyz), but the alerts'. */
export function addNodeAgentReadinessChecks(
  health: Health,
  agent: Pick<NodeAgent, "ready" | "armed" | "loader" | "loaderFailure">,
  kernel: () => KernelWatcher | undefined,
): void {
  health.addReadinessCheck("discover-synced", () => ({
    ok: agent.ready(),
    message: "waiting for the first list of policies, pods and HiveData",
  }));
  health.addReadinessCheck("traps-armed", () => agent.armed());
  addKernelReadinessChecks(health, {
    kernel,
    loader: () => agent.loader(),
    loaderFailure: () => agent.loaderFailure(),
  });
}
