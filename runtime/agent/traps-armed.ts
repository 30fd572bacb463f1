/**
 * Readiness that means watching: an agent whose node loads its kernel's program is ready only
 * once the program is attached and every HiveData its first pass wanted (this node's pods and
 * image layers at start) is in the kernel's watch map. Without it `kubectl rollout status`
 * returned while the program was still loading, and the README's first read went unseen.
 * Latched: what is armed later is reported by HivePolicy status, not by taking the agent out of
 * rotation (an API-server outage must not fail readiness).
 */
import type { DiscoverController } from "../controllers/discover.ts";
import type { LoaderController } from "../controllers/loader.ts";
import type { CheckResult } from "../metrics/health.ts";

export interface ArmedSources {
  /** False when this agent never loads (roles.loader off): nothing of its own to arm. */
  loads: boolean;
  /** This node's name: a kernel Lease held under `<node>/…` is this node's, not another's. */
  nodeName: string;
  discover: Pick<DiscoverController, "firstArming">;
  loader: () => Pick<LoaderController, "armed" | "stats"> | undefined;
  /** The kernel Lease's holder as this agent last saw it, if it holds the node lock. */
  kernelHolder: () => string | undefined;
  /** Why the program could not load (reported by the kernel-program check). */
  loaderFailure: () => string | undefined;
}

/** How many missing HiveData names the message lists. */
const NAMED = 3;

export function createArmedCheck(sources: ArmedSources): () => CheckResult {
  let armed = !sources.loads;
  const check = (): CheckResult => {
    if (sources.loaderFailure() !== undefined) return { ok: true }; // named by kernel-program
    const loader = sources.loader();
    if (!loader) {
      const holder = sources.kernelHolder();
      // Another node sharing this kernel (kind) loads it: its traps are that agent's to arm.
      if (holder && !holder.startsWith(`${sources.nodeName}/`)) return { ok: true };
      return {
        ok: false,
        message:
          "the kernel program is not loaded yet (this node's loader lock, its kernel's Lease, then the load)",
      };
    }
    const wanted = sources.discover.firstArming();
    if (wanted === undefined)
      return { ok: false, message: "discover has not yet written this node's HiveData (its first pass)" };
    if (loader.stats().syncs === 0)
      return { ok: false, message: "the kernel watch map is not yet filled from this kernel's HiveData" };
    const missing = [...wanted].filter((key) => !loader.armed(key));
    if (missing.length > 0) {
      const named = missing.slice(0, NAMED).join(", ");
      return {
        ok: false,
        message: `${missing.length} of ${wanted.size} HiveData not yet in the kernel watch map (${named}${missing.length > NAMED ? ", …" : ""})`,
      };
    }
    return { ok: true };
  };
  return () => {
    if (armed) return { ok: true };
    const result = check();
    armed = result.ok && sources.loaderFailure() === undefined;
    return result;
  };
}
