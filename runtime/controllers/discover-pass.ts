/**
 * One discover pass, as its steps: collect what to resolve (every trap × running container it
 * matches, discover-items.ts), read the Node that owns the HiveData, resolve each container's
 * traps in one batch and the traps' files in the image layers, write what changed
 * (discover-writes.ts), then report the trap errors. What lasts from one pass to the next is kept
 * here: the backoffs of failures and since when each container has been waiting.
 */
import { trapDeny } from "../../api/policy.ts";
import type { DiscoverOptions, DiscoverStats } from "./discover.ts";
import type { DiscoverCache } from "./discover-cache.ts";
import { byContainer, collectItems, collectLayerTraps, type Item } from "./discover-items.ts";
import { armLayers } from "./discover-layers.ts";
import { FailureBackoff, PassOutcomes } from "./discover-outcomes.ts";
import { applyDataChanges } from "./discover-writes.ts";
import type { NodeOwner } from "./hive-data.ts";
import { inPool } from "./in-pool.ts";
import { createObjectRetries, type ObjectRetries } from "./object-retries.ts";
import { resolveContainer } from "./resolve-container.ts";
import { dueReports, TrapErrors } from "./trap-errors.ts";

export interface DiscoverPassOptions extends DiscoverOptions {
  cache: DiscoverCache;
  stats: DiscoverStats;
  /** Asks for another pass in `delayMs`. */
  retryIn: (delayMs: number) => void;
  /** The informers' first lists are in: deletions are safe. */
  synced: () => boolean;
}

export class DiscoverPass {
  private readonly o: DiscoverPassOptions;
  private readonly retryBaseMs: number;
  private readonly retryMaxMs: number;
  private readonly concurrency: number;
  private readonly notReadyReportMs: number;
  /** Consecutive transient failures per item, for the backoff. */
  private readonly attempts: FailureBackoff;
  /** Consecutive failed reads of the Node that owns the HiveData. */
  private readonly ownerReads: FailureBackoff;
  /** Since when each trap × container has been waiting for its container (for the report delay). */
  private readonly waitingSince = new Map<string, number>();
  /** HiveData writes and deletes that failed, each on its own backoff. */
  private readonly writeRetries: ObjectRetries;
  private firstArming: Set<string> | undefined;

  constructor(options: DiscoverPassOptions) {
    this.o = options;
    this.retryBaseMs = options.retryBaseMs ?? 500;
    this.retryMaxMs = options.retryMaxMs ?? 60_000;
    this.concurrency = options.concurrency ?? 16;
    this.notReadyReportMs = options.notReadyReportMs ?? 30_000;
    const backoff = { baseMs: this.retryBaseMs, maxMs: this.retryMaxMs };
    this.attempts = new FailureBackoff(backoff);
    this.ownerReads = new FailureBackoff(backoff);
    this.writeRetries = createObjectRetries(backoff);
  }

  /** The HiveData the first pass after the lists wanted, once written (DiscoverController.firstArming). */
  firstArmed(): ReadonlySet<string> | undefined {
    return this.firstArming;
  }

  async run(): Promise<void> {
    const { cache, stats, log, nodeName, platformNamespace } = this.o;
    stats.passes += 1;
    const errors = new TrapErrors(nodeName);
    const items = collectItems(cache.policies.values(), cache.pods.values(), platformNamespace, errors, log);
    reportDenyUnavailable(items, errors, this.o.denyUnavailable?.());
    const owner = await this.readOwner(items);
    if (!owner) return;
    const outcomes = await this.resolve(items, errors, owner.node);
    await this.write(outcomes);
    if (this.o.synced()) this.firstArming ??= new Set([...outcomes.desired.keys(), ...outcomes.keep]);
    await this.report(errors);
  }

  /**
   * The Node owning this node's HiveData (read when there is something to write); undefined when
   * it cannot be read now: nothing is written, and the pass is retried with backoff.
   */
  private async readOwner(items: readonly Item[]): Promise<{ node: NodeOwner | undefined } | undefined> {
    const { nodeOwner, nodeName, log } = this.o;
    if (!nodeOwner || items.length === 0) return { node: undefined };
    try {
      const node = await nodeOwner();
      this.ownerReads.succeeded("node");
      return { node };
    } catch (error) {
      const delayMs = this.ownerReads.failed("node");
      log.warn("cannot read this agent's Node, which owns its HiveData; nothing is written until it can", {
        node: nodeName,
        error,
      });
      this.o.retryIn(delayMs);
      return undefined;
    }
  }

  /** Resolves every item, container by container, then the traps' files in the image layers. */
  private async resolve(
    items: readonly Item[],
    errors: TrapErrors,
    owner: NodeOwner | undefined,
  ): Promise<PassOutcomes> {
    const { cache, resolver, kernelId, nodeName, stats, log } = this.o;
    const outcomes = new PassOutcomes({
      nodeName,
      kernelId,
      owner,
      data: cache.data,
      backoff: this.attempts,
      errors,
      stats,
      log,
    });
    await inPool([...byContainer(items)], this.concurrency, ([containerId, group]) =>
      resolveContainer(resolver, containerId, group, (item, trap, outcome, executables) =>
        outcomes.record(item, trap, outcome, executables),
      ),
    );
    const { layers, platformNamespace } = this.o;
    if (layers) {
      const traps = collectLayerTraps(cache.policies.values(), cache.pods.values(), platformNamespace);
      const retryMs = Math.min(this.retryMaxMs, this.retryBaseMs * 4);
      armLayers(
        traps,
        { layers, kernelId, nodeName, platformNamespace, owner, data: cache.data, retryMs, log },
        outcomes,
      );
    }
    if (outcomes.nextRetryMs !== Number.POSITIVE_INFINITY) this.o.retryIn(outcomes.nextRetryMs);
    this.attempts.retain(new Set(items.map((item) => `${item.namespace}/${item.name}`))); // gone while waiting
    return outcomes;
  }

  private async write(outcomes: PassOutcomes): Promise<void> {
    await applyDataChanges(
      { desired: outcomes.desired, keep: outcomes.keep },
      {
        writer: this.o.writer,
        data: this.o.cache.data,
        synced: this.o.synced(),
        concurrency: this.concurrency,
        log: this.o.log,
        stats: this.o.stats,
        retries: this.writeRetries,
        retry: (delayMs) => this.o.retryIn(delayMs),
        ...(this.o.onDesired ? { onWrite: this.o.onDesired } : {}),
      },
    );
  }

  /** Reports the pass's trap errors; a container waiting is reported only once it has waited a while. */
  private async report(errors: TrapErrors): Promise<void> {
    const reported = dueReports(errors.list, this.waitingSince, this.notReadyReportMs, (ms) =>
      this.o.retryIn(ms),
    );
    try {
      await this.o.reporter.sync(reported);
    } catch (error) {
      this.o.log.warn("trap error report failed; retried on the next pass", { error });
      this.o.retryIn(this.retryBaseMs);
    }
  }
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
