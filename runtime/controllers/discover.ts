/**
 * Discover controller (every node): HivePolicies × the pods of THIS node → one HiveData per
 * trap × matched container, with the inode resolved inside the container. Event-driven:
 * informer events call the `on*` methods; a serial runner coalesces them into passes.
 *
 * A pass resolves every matched container again (cheap: a handful of syscalls each, PIDs
 * cached per pass) and writes only what changed, so it is idempotent and also serves the
 * re-resolution a loader asks for when a trapped file's directory changes.
 *
 * The steps, each in its own unit: the watch events update the cache (discover-cache.ts); a pass
 * (discover-pass.ts) collects the items, resolves them container by container
 * (resolve-container.ts, discover-outcomes.ts) and in the image layers (discover-layers.ts),
 * writes what changed (discover-writes.ts) and reports the trap errors.
 */
import type { V1Pod } from "@kubernetes/client-node";
import type { HiveData } from "../../api/data.ts";
import type { HivePolicy } from "../../api/policy.ts";
import type { FileResolver } from "../discover/file-resolver.ts";
import type { Logger } from "../log.ts";
import { DiscoverCache } from "./discover-cache.ts";
import type { LayerFinder } from "./discover-layers.ts";
import { DiscoverPass } from "./discover-pass.ts";
import type { NodeOwner } from "./hive-data.ts";
import { createPacedTrigger } from "./paced-trigger.ts";
import { type DataWriter, objectKey, type TrapErrorReporter, type WatchEventType } from "./ports.ts";
import { type ControllerLifecycle, createReconcileLoop } from "./reconcile-loop.ts";

/** The trap files in this node's image layers: see discover-layers.ts. */
export type { LayerFinder } from "./discover-layers.ts";

export interface DiscoverOptions {
  nodeName: string;
  /** The monitor's namespace: only its policies reach other namespaces' pods (match.ts policyReachesPod). */
  platformNamespace: string;
  kernelId: string;
  resolver: FileResolver;
  writer: DataWriter;
  /**
   * The Node this agent runs on, as the owner of its HiveData (read when first needed; a
   * failure is retried with backoff and nothing is written meanwhile).
   */
  nodeOwner?: () => Promise<NodeOwner>;
  reporter: TrapErrorReporter;
  log: Logger;
  /**
   * The node's image layers: a trap that applies to a pod here is armed on its file in every
   * layer before the pod's containers run (the loader attributes accesses by cgroup).
   */
  layers?: LayerFinder;
  /** Backoff for containers not ready: base and cap (ms). */
  retryBaseMs?: number;
  retryMaxMs?: number;
  debounceMs?: number;
  /** At least this long between passes that HiveData re-resolve requests cause (default 2 s). */
  resolveRequestIntervalMs?: number;
  /** A container still not running after this long is reported in the policy status (default 30 s). */
  notReadyReportMs?: number;
  /** Parallel resolutions / API writes per pass. */
  concurrency?: number;
  /** Called with each reconcile pass's duration in seconds (hive_reconcile_duration_seconds). */
  observeReconcile?: (seconds: number) => void;
  /**
   * Each HiveData this node is about to create or replace, before the write: this agent's own
   * loader arms it at once, not after a round trip through the API server.
   */
  onDesired?: (d: HiveData) => void;
  /**
   * After each pod event of this node, once the pod cache shows it: labels, names and namespaces
   * decide which traps select an access (the loader's quiet map is cleared).
   */
  onPodChanged?: () => void;
  /**
   * Why this node's kernel cannot deny (undefined while it can): each container of a denying
   * trap is then reported `DenyUnavailable` (the trap alerts there, and its status says so).
   */
  denyUnavailable?: () => string | undefined;
}

export interface DiscoverStats {
  passes: number;
  resolved: number;
  created: number;
  updated: number;
  deleted: number;
  errors: number;
  /** Re-resolve requests answered by a later pass than their own (createPacedTrigger). */
  resolveRequestsFolded: number;
}

export interface DiscoverController extends ControllerLifecycle<DiscoverStats> {
  onPolicy(type: WatchEventType, policy: HivePolicy): void;
  onPod(type: WatchEventType, pod: V1Pod): void;
  onData(type: WatchEventType, data: HiveData): void;
  /** The image layers changed (an image was unpacked or removed): their files are found again. */
  onLayersChanged(): void;
  /** A pod of this node by the uid its cgroups carry (kubelet-pod-uids.ts), as its last watch event showed it. */
  podByUid(uid: string, atNs?: bigint): V1Pod | undefined;
  /**
   * A trapped file of this node changed (this agent's loader saw it in the kernel): re-resolve.
   * Never dropped: asked while a pass runs, another pass follows it.
   */
  resolveNow(reason: string): void;
  /**
   * The HiveData (`namespace/name`) the first pass after the lists wanted on this node, once that
   * pass has written them: what this agent must see armed before it is ready (traps-armed.ts).
   */
  firstArming(): ReadonlySet<string> | undefined;
}

export function createDiscoverController(options: DiscoverOptions): DiscoverController {
  const { log } = options;
  const cache = new DiscoverCache(options.nodeName, log);
  const stats: DiscoverStats = {
    passes: 0,
    resolved: 0,
    created: 0,
    updated: 0,
    deleted: 0,
    errors: 0,
    resolveRequestsFolded: 0,
  };
  const pass = new DiscoverPass({
    ...options,
    cache,
    stats,
    retryIn: (delayMs) => runner.retryIn(delayMs),
    synced: (): boolean => loop.synced(),
  });
  const loop = createReconcileLoop((): Promise<void> => pass.run(), stats, {
    debounceMs: options.debounceMs ?? 20,
    onPass: options.observeReconcile,
    onError: (error) => log.error("discover pass failed", { error }),
  });
  const { runner } = loop;
  // Another node's loader asks through HiveData (a kernel shared by nodes); whoever can write that
  // annotation could ask endlessly: at most one pass per interval answers all the asks within it.
  const requested = createPacedTrigger(() => runner.trigger(), options.resolveRequestIntervalMs ?? 2000);

  return {
    onPolicy(type, policy) {
      // Status and finalizer writes change neither the traps nor the deletion state: no pass.
      if (cache.onPolicy(type, policy)) runner.trigger();
    },
    onPod(type, pod) {
      if (!cache.onPod(type, pod)) return;
      options.onPodChanged?.();
      runner.trigger();
    },
    onData(type, d) {
      const seen = cache.onData(type, d);
      if (seen === "deleted") runner.trigger(); // deleted by someone else while still wanted: write it again
      if (seen !== "requested") return;
      log.debug("re-resolving after a change in a trapped file's directory", { name: objectKey(d) });
      if (!requested.request()) stats.resolveRequestsFolded = requested.folded;
    },
    onLayersChanged() {
      runner.trigger();
    },
    podByUid(uid, atNs) {
      return cache.podUids.podByUid(uid, atNs);
    },
    firstArming: () => pass.firstArmed(),
    resolveNow(reason) {
      log.debug("re-resolving: a trapped file changed", { reason });
      runner.trigger();
    },
    ...loop.lifecycle,
    stop() {
      requested.stop();
      loop.lifecycle.stop();
    },
  };
}
