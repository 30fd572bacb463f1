/**
 * What one discover pass makes of each trap × container it resolved: the HiveData it wants, those
 * it keeps as they are (a failure that goes away on its own: retried with backoff, so a slow
 * runtime or a restarting container disarms nothing), and the trap errors it reports.
 */
import type { Executable, HiveData } from "../../api/data.ts";
import { HiveError, isHiveError } from "../../api/errors.ts";
import type { HiveTrap } from "../../api/policy.ts";
import { type BackoffOptions, backoffDelay } from "../backoff.ts";
import type { ResolveOutcome } from "../discover/file-resolver.ts";
import type { Logger } from "../log.ts";
import { displaySafe } from "../text.ts";
import type { Item } from "./discover-items.ts";
import { buildHiveData, markMissing, type NodeOwner } from "./hive-data.ts";
import { TRAP_ERROR_MESSAGE_MAX } from "./ports.ts";
import type { TrapErrors } from "./trap-errors.ts";

/**
 * Failures that go away on their own (the container starts, the runtime answers, the kernel
 * program is loaded): retried with backoff.
 */
const TRANSIENT = new Set(["ContainerNotReady", "ContainerNotFound", "RuntimeUnavailable", "TrapNotProven"]);

/**
 * What a failed resolution does to its HiveData (every failure is reported too):
 * - `missing`: the file is gone (perhaps to be re-created): the HiveData stays, marked missing, so
 *   that its directory stays watched and the re-creation is noticed without polling;
 * - `retry`: the container restarts, the runtime is slow, a mount on the path hangs, the node is
 *   out of descriptors or the resolver failed: what was there is kept, and resolved again later;
 * - `drop`: nothing to keep (the pass does not want it).
 */
export function failureVerdict(e: HiveError, hadData: boolean): "missing" | "retry" | "drop" {
  if (hadData && (e.code === "FileNotFound" || e.code === "PathEscapesContainer")) return "missing";
  if (
    TRANSIENT.has(e.code) ||
    e.details.timedOut === true ||
    e.details.refused === true ||
    e.details.transient === true
  )
    return "retry";
  return "drop";
}

/**
 * Consecutive failures per key, and the delay before the next try. No jitter: these retries are
 * one node's own, nothing to spread.
 */
export class FailureBackoff {
  private readonly attempts = new Map<string, number>();
  private readonly options: BackoffOptions;

  constructor(options: BackoffOptions) {
    this.options = options;
  }

  /** Counts a failure of `key`; returns the delay before it is tried again (ms). */
  failed(key: string): number {
    const n = (this.attempts.get(key) ?? 0) + 1;
    this.attempts.set(key, n);
    return backoffDelay(n, this.options, () => 1);
  }

  succeeded(key: string): void {
    this.attempts.delete(key);
  }

  /** Forgets the keys not in `current` (gone while waiting). */
  retain(current: ReadonlySet<string>): void {
    for (const k of [...this.attempts.keys()]) if (!current.has(k)) this.attempts.delete(k);
  }
}

export interface OutcomeContext {
  nodeName: string;
  kernelId: string;
  /** The Node owning the HiveData written (undefined when none is set). */
  owner: NodeOwner | undefined;
  /** This node's HiveData as last seen, by namespace/name. */
  data: ReadonlyMap<string, HiveData>;
  /** Transient failures per item, across passes. */
  backoff: FailureBackoff;
  errors: TrapErrors;
  stats: { resolved: number; errors: number };
  log: Logger;
}

/** One pass's outcomes, recorded item by item (`record`). */
export class PassOutcomes {
  /** The HiveData the pass wants, by namespace/name. */
  readonly desired = new Map<string, HiveData>();
  /** Names the pass could not decide (transient failures): left as they are. */
  readonly keep = new Set<string>();
  /** The earliest retry a transient failure asks for (ms; Infinity when none does). */
  nextRetryMs = Number.POSITIVE_INFINITY;
  private readonly c: OutcomeContext;

  constructor(context: OutcomeContext) {
    this.c = context;
  }

  /** Asks for another pass within `ms` at the latest. */
  retryWithin(ms: number): void {
    this.nextRetryMs = Math.min(this.nextRetryMs, ms);
  }

  record(item: Item, trap: HiveTrap, outcome: ResolveOutcome, executables: Executable[]): void {
    if (outcome.ok) this.resolved(item, trap, outcome.file, executables);
    else this.failed(item, trap, outcome.error);
  }

  private resolved(
    item: Item,
    trap: HiveTrap,
    found: Extract<ResolveOutcome, { ok: true }>["file"],
    executables: Executable[],
  ): void {
    const { stats, backoff, kernelId, nodeName, owner, log } = this.c;
    const key = `${item.namespace}/${item.name}`;
    stats.resolved += 1;
    backoff.succeeded(key);
    this.desired.set(
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
  }

  private failed(item: Item, trap: HiveTrap, error: unknown): void {
    const key = `${item.namespace}/${item.name}`;
    const e = isHiveError(error)
      ? error
      : new HiveError("PathInvalid", "unexpected failure while resolving the trap path", {
          object: trap.path,
          cause: error,
          transient: true,
        });
    this.c.stats.errors += 1;
    const had = this.c.data.get(key);
    const verdict = failureVerdict(e, had !== undefined);
    if (verdict === "missing" && had) this.desired.set(key, markMissing(had));
    else if (verdict === "retry") {
      this.keep.add(key);
      this.retryWithin(this.c.backoff.failed(key));
    }
    this.c.errors.add(item.policy, item.trapId, {
      reason: e.code,
      // Names symlinks and paths of the container's choosing: escaped and bounded before it leaves the node.
      message: displaySafe(e.describe(), TRAP_ERROR_MESSAGE_MAX),
      pod: item.pod.metadata?.name ?? "",
      podNamespace: item.pod.metadata?.namespace ?? "default",
      container: item.container.name,
    });
  }
}
