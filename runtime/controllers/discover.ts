/**
 * Discover controller (every node): HivePolicies × the pods of THIS node → one HiveData per
 * trap × matched container, with the inode resolved inside the container. Event-driven:
 * informer events call the `on*` methods; a serial runner coalesces them into passes.
 *
 * A pass resolves every matched container again (cheap: a handful of syscalls each, PIDs
 * cached per pass) and writes only what changed, so it is idempotent and also serves the
 * re-resolution a loader asks for when a trapped file's directory changes.
 */

import type { V1Pod } from "@kubernetes/client-node";
import type { Executable, HiveData } from "../../api/data.ts";
import { HiveError, isHiveError } from "../../api/errors.ts";
import { ANNOTATION_RESOLVE_REQUEST, LABEL_NODE, LABEL_TRAP_ID } from "../../api/meta.ts";
import { type HivePolicy, type HiveTrap, parseMode, trapDeny } from "../../api/policy.ts";
import { exactAllowPaths } from "../alerts/allowlist.ts";
import { backoffDelay } from "../backoff.ts";
import type { ContainerFiles, FileResolver, ResolveOutcome } from "../discover/file-resolver.ts";
import type { ResolveOptions } from "../discover/safe-path.ts";
import type { FileKey } from "../kernel/contract.ts";
import type { Logger } from "../log.ts";
import { displaySafe } from "../text.ts";
import { byContainer, collectItems, collectLayerTraps, type Item } from "./discover-items.ts";
import { applyDataChanges } from "./discover-writes.ts";
import {
  buildHiveData,
  buildLayerData,
  fileIdentity,
  isLayerData,
  markMissing,
  type NodeOwner,
} from "./hive-data.ts";
import { inPool } from "./in-pool.ts";
import { KubeletPodUids } from "./kubelet-pod-uids.ts";
import { createObjectRetries } from "./object-retries.ts";
import { createPacedTrigger } from "./paced-trigger.ts";
import {
  type DataWriter,
  objectKey,
  specProblems,
  TRAP_ERROR_MESSAGE_MAX,
  type TrapErrorReporter,
  type WatchEventType,
} from "./ports.ts";
import { type ControllerLifecycle, createReconcileLoop } from "./reconcile-loop.ts";
import { dueReports, TrapErrors } from "./trap-errors.ts";

/**
 * Failures that go away on their own (the container starts, the runtime answers, the kernel
 * program is loaded): retried with backoff.
 */
const TRANSIENT = new Set(["ContainerNotReady", "ContainerNotFound", "RuntimeUnavailable", "TrapNotProven"]);

/** The trap files in this node's image layers (runtime/discover/image-layers.ts), proven. */
export interface LayerFinder {
  /** The kernel identities of every copy of `path` in the node's image layers; throws HiveError. */
  find(path: string): FileKey[];
}

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
  podByUid(uid: string): V1Pod | undefined;
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
  const { nodeName, kernelId, resolver, writer, reporter, log } = options;
  const retryBaseMs = options.retryBaseMs ?? 500;
  const retryMaxMs = options.retryMaxMs ?? 60_000;
  const concurrency = options.concurrency ?? 16;
  const policies = new Map<string, HivePolicy>();
  const pods = new Map<string, V1Pod>();
  /** The same pods by the uid their cgroups carry: what an access attributed by cgroup names. */
  const podUids = new KubeletPodUids(nodeName, log);
  const data = new Map<string, HiveData>();
  const resolveRequests = new Map<string, string>();
  /** Consecutive transient failures per item, for the backoff. */
  const attempts = new Map<string, number>();
  /** Since when each trap × container has been waiting for its container (for the report delay). */
  const waitingSince = new Map<string, number>();
  const notReadyReportMs = options.notReadyReportMs ?? 30_000;
  let ownerAttempts = 0;
  /** HiveData writes and deletes that failed, each on its own backoff. */
  const writeRetries = createObjectRetries({ baseMs: retryBaseMs, maxMs: retryMaxMs });
  const stats: DiscoverStats = {
    passes: 0,
    resolved: 0,
    created: 0,
    updated: 0,
    deleted: 0,
    errors: 0,
    resolveRequestsFolded: 0,
  };

  let firstArming: Set<string> | undefined;

  async function pass(): Promise<void> {
    stats.passes += 1;
    const desired = new Map<string, HiveData>();
    const keep = new Set<string>();
    const errors = new TrapErrors(nodeName);
    const items = collectItems(policies.values(), pods.values(), options.platformNamespace, errors, log);
    reportDenyUnavailable(items, errors, options.denyUnavailable?.());
    let owner: NodeOwner | undefined;
    if (options.nodeOwner && items.length > 0) {
      try {
        owner = await options.nodeOwner();
        ownerAttempts = 0;
      } catch (error) {
        ownerAttempts += 1;
        log.warn("cannot read this agent's Node, which owns its HiveData; nothing is written until it can", {
          node: nodeName,
          error,
        });
        runner.retryIn(backoffDelay(ownerAttempts, { baseMs: retryBaseMs, maxMs: retryMaxMs }, () => 1));
        return;
      }
    }

    let nextRetryMs = Number.POSITIVE_INFINITY;
    const record = (item: Item, trap: HiveTrap, outcome: ResolveOutcome, executables: Executable[]) => {
      const key = `${item.namespace}/${item.name}`;
      if (outcome.ok) {
        const found = outcome.file;
        stats.resolved += 1;
        attempts.delete(key);
        desired.set(
          key,
          buildHiveData({
            policy: item.policy,
            trap,
            trapId: item.trapId,
            pod: item.pod,
            container: item.container,
            kernelId,
            nodeName,
            namespace: item.namespace,
            file: found.key,
            parent: found.parent,
            owner,
            executables,
            imageFile: found.lower,
          }),
        );
        if (found.created)
          log.info("created trap file in container", {
            path: trap.path,
            pod: item.pod.metadata?.name,
            container: item.container.name,
          });
        return;
      }
      const error = outcome.error;
      const e = isHiveError(error)
        ? error
        : new HiveError("PathInvalid", "unexpected failure while resolving the trap path", {
            object: trap.path,
            cause: error,
            transient: true,
          });
      stats.errors += 1;
      const had = data.get(key);
      if (had && (e.code === "FileNotFound" || e.code === "PathEscapesContainer")) {
        // Deleted (perhaps to be re-created): stop watching the old inode but keep the HiveData, so its
        // directory stays watched and the re-creation is noticed without polling.
        desired.set(key, markMissing(had));
      } else if (
        TRANSIENT.has(e.code) ||
        e.details.timedOut === true ||
        e.details.refused === true ||
        e.details.transient === true
      ) {
        // The container restarts, the runtime is slow, a mount on the path hangs, the node is out of
        // descriptors or the resolver failed: keep what we had and retry.
        keep.add(key);
        const n = (attempts.get(key) ?? 0) + 1;
        attempts.set(key, n);
        // No jitter: these retries are one node's own containers, nothing to spread.
        nextRetryMs = Math.min(
          nextRetryMs,
          backoffDelay(n, { baseMs: retryBaseMs, maxMs: retryMaxMs }, () => 1),
        );
      }
      errors.add(item.policy, item.trapId, {
        reason: e.code,
        // Names symlinks and paths of the container's choosing: escaped and bounded before it leaves the node.
        message: displaySafe(e.describe(), TRAP_ERROR_MESSAGE_MAX),
        pod: item.pod.metadata?.name ?? "",
        podNamespace: item.pod.metadata?.namespace ?? "default",
        container: item.container.name,
      });
    };
    await inPool([...byContainer(items)], concurrency, ([containerId, group]) =>
      resolveContainer(resolver, containerId, group, record),
    );
    if (options.layers) {
      const layerRetry = armLayers(options.layers, desired, keep, owner);
      if (layerRetry !== undefined) nextRetryMs = Math.min(nextRetryMs, layerRetry);
    }
    if (nextRetryMs !== Number.POSITIVE_INFINITY) runner.retryIn(nextRetryMs);
    const current = new Set(items.map((item) => `${item.namespace}/${item.name}`));
    for (const k of [...attempts.keys()]) if (!current.has(k)) attempts.delete(k); // gone while waiting

    await applyDataChanges(
      { desired, keep },
      {
        writer,
        data,
        synced: loop.synced(),
        concurrency,
        log,
        stats,
        retries: writeRetries,
        retry: (delayMs) => runner.retryIn(delayMs),
        ...(options.onDesired ? { onWrite: options.onDesired } : {}),
      },
    );
    if (loop.synced()) firstArming ??= new Set([...desired.keys(), ...keep]);
    const reported = dueReports(errors.list, waitingSince, notReadyReportMs, (ms) => runner.retryIn(ms));
    try {
      await reporter.sync(reported);
    } catch (error) {
      log.warn("trap error report failed; retried on the next pass", { error });
      runner.retryIn(retryBaseMs);
    }
  }

  /**
   * The layer HiveData of every trap that applies to a pod here; what cannot be found now is kept
   * as it was and retried (returns the delay), so a slow disk or an unloaded program disarms nothing.
   */
  function armLayers(
    layers: LayerFinder,
    desired: Map<string, HiveData>,
    keep: Set<string>,
    owner: NodeOwner | undefined,
  ): number | undefined {
    let retryMs: number | undefined;
    for (const { policy, trapIndex, trapId } of collectLayerTraps(
      policies.values(),
      pods.values(),
      options.platformNamespace,
    )) {
      const trap = policy.spec.traps[trapIndex];
      if (!trap) continue;
      let files: FileKey[];
      try {
        files = layers.find(trap.path);
      } catch (error) {
        log.warn("cannot find the trapped file in this node's image layers; retried", {
          trapId,
          path: trap.path,
          error,
        });
        for (const [key, d] of data)
          if (isLayerData(d) && d.metadata.labels?.[LABEL_TRAP_ID] === trapId) keep.add(key);
        retryMs = Math.min(retryMs ?? retryMaxMs, retryBaseMs * 4);
        continue;
      }
      for (const file of files) {
        const d = buildLayerData({
          policy,
          trap,
          trapId,
          kernelId,
          nodeName,
          namespace: options.platformNamespace,
          file,
          owner,
        });
        desired.set(`${d.metadata.namespace}/${d.metadata.name}`, d);
      }
    }
    return retryMs;
  }

  const loop = createReconcileLoop(pass, stats, {
    debounceMs: options.debounceMs ?? 20,
    onPass: options.observeReconcile,
    onError: (error) => log.error("discover pass failed", { error }),
  });
  const { runner } = loop;
  // Another node's loader asks through HiveData (a kernel shared by nodes); whoever can write that
  // annotation could ask endlessly: at most one pass per interval answers all the asks within it.
  const requested = createPacedTrigger(() => runner.trigger(), options.resolveRequestIntervalMs ?? 2000);

  return {
    onPolicy(eventType, policy) {
      let type = eventType;
      const problems = type === "DELETED" ? undefined : specProblems(policy);
      if (problems) {
        log.warn("ignoring a HivePolicy with an invalid spec", { policy: objectKey(policy), problems });
        type = "DELETED";
      }
      const key = objectKey(policy);
      const had = policies.get(key);
      if (type === "DELETED") policies.delete(key);
      else policies.set(key, policy);
      // Status and finalizer writes change neither the traps nor the deletion state: no pass.
      const unchanged =
        type === "MODIFIED" &&
        had?.metadata.generation === policy.metadata.generation &&
        Boolean(had?.metadata.deletionTimestamp) === Boolean(policy.metadata.deletionTimestamp);
      if (!unchanged) runner.trigger();
    },
    onPod(type, pod) {
      if (pod.spec?.nodeName !== nodeName && type !== "DELETED") return; // defence: the watch is node-scoped already
      if (type === "DELETED") pods.delete(objectKey(pod));
      else pods.set(objectKey(pod), pod);
      podUids.onPod(type, pod);
      options.onPodChanged?.();
      runner.trigger();
    },
    onData(type, d) {
      if (d.metadata.labels?.[LABEL_NODE] !== nodeName) return;
      const key = objectKey(d);
      if (type === "DELETED") {
        data.delete(key);
        resolveRequests.delete(key);
        runner.trigger(); // deleted by someone else while still wanted: write it again
        return;
      }
      data.set(key, d);
      const request = d.metadata.annotations?.[ANNOTATION_RESOLVE_REQUEST];
      if (request !== undefined && resolveRequests.get(key) !== request) {
        resolveRequests.set(key, request);
        log.debug("re-resolving after a change in a trapped file's directory", { name: key });
        if (!requested.request()) stats.resolveRequestsFolded = requested.folded;
      }
    },
    onLayersChanged() {
      runner.trigger();
    },
    podByUid(uid) {
      return podUids.podByUid(uid);
    },
    firstArming: () => firstArming,
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

/**
 * Resolves the traps of one container in one batch: its PID looked up and its process held
 * open once, one trip to a resolver thread however many traps match it. Every item gets its
 * outcome through `record`.
 */
async function resolveContainer(
  resolver: FileResolver,
  containerId: string,
  group: readonly Item[],
  record: (item: Item, trap: HiveTrap, outcome: ResolveOutcome, executables: Executable[]) => void,
): Promise<void> {
  const work: { item: Item; trap: HiveTrap; options: ResolveOptions }[] = [];
  for (const item of group) {
    const trap = item.policy.spec.traps[item.trapIndex];
    if (!trap) continue;
    try {
      const options = trap.create
        ? { create: true, mode: trap.mode === undefined ? 0o444 : parseMode(trap.mode) }
        : {};
      work.push({ item, trap, options });
    } catch (error) {
      // Only parseMode throws here: a mode that is not octal or would escalate (admitted before the CRD refused it).
      const message = (error as Error).message;
      record(
        item,
        trap,
        { ok: false, error: new HiveError("PolicyInvalid", message, { object: trap.path }) },
        [],
      );
    }
  }
  // The exact executables the allow entries name, found in this container like a trapped path
  // (safe walk, proven): an entry holds only for those files (runtime/alerts/allowlist.ts).
  const exePaths = [...new Set(work.flatMap(({ trap }) => exactAllowPaths(trap)))];
  let outcomes: ResolveOutcome[];
  let exeOutcomes: ResolveOutcome[] = [];
  let files: ContainerFiles | undefined;
  try {
    files = await resolver.openContainer(containerId);
    const all = await files.resolveAll([
      ...work.map(({ trap, options }) => ({ path: trap.path, options })),
      ...exePaths.map((path) => ({ path, options: {} })),
    ]);
    outcomes = all.slice(0, work.length);
    exeOutcomes = all.slice(work.length);
  } catch (error) {
    outcomes = work.map(() => ({ ok: false, error }));
  } finally {
    files?.close();
  }
  const found = new Map<string, Executable>();
  exePaths.forEach((path, i) => {
    const outcome = exeOutcomes[i];
    if (outcome?.ok && outcome.file.fileType === "file") {
      found.set(path, { path, ...fileIdentity(outcome.file.key) });
    }
  });
  work.forEach(({ item, trap }, i) => {
    const executables = exactAllowPaths(trap).flatMap((path) => found.get(path) ?? []);
    record(item, trap, outcomes[i] ?? { ok: false, error: undefined }, executables);
  });
}

/** Each container of a denying trap, on a node whose kernel cannot deny: alerted, not refused. */
function reportDenyUnavailable(items: readonly Item[], errors: TrapErrors, reason: string | undefined): void {
  if (reason === undefined) return;
  for (const item of items) {
    const trap = item.policy.spec.traps[item.trapIndex];
    if (!trap || trapDeny(trap) !== "deny") continue;
    errors.add(item.policy, item.trapId, {
      reason: "DenyUnavailable",
      message: `this node's kernel cannot deny, so accesses are alerted and not refused: ${reason}`,
      pod: item.pod.metadata?.name ?? "",
      podNamespace: item.pod.metadata?.namespace ?? "default",
      container: item.container.name,
    });
  }
}
