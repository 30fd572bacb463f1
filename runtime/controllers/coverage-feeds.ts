/**
 * The pods role's view of node coverage (coverage.ts): which nodes exist, which run a ready agent,
 * and the pods of the others. Memory stays bounded by what is uncovered, not by the cluster:
 * - Nodes: names only (the informer's transform drops labels, status and images on arrival);
 * - the agent's own pods (the DaemonSet's selector, in the monitor's namespace): one or two a node,
 *   kept to node name and Ready condition;
 * - the pods of each node without a ready agent, by field selector `spec.nodeName=<node>`, watched
 *   only while that node is uncovered (normally none). No watch of every pod of the cluster.
 * A node counts as uncovered once it has been without a ready agent for a grace period: a node
 * joining before its agent is ready, or an agent restarted by a rolling update (its pinned program
 * keeps watching meanwhile), is not reported.
 */
import type { V1Node, V1Pod } from "@kubernetes/client-node";
import { AGENT_SELECTOR } from "../../api/meta.ts";
import type { Informer, InformerStats } from "../k8s/informer.ts";
import { uncoveredNodes } from "./coverage.ts";
import { type FeedOptions, feed, nodePodFeed, PODS } from "./feeds.ts";

const NODES = { group: "", version: "v1", plural: "nodes" };

export interface CoverageWatch {
  /** Resolves once nodes and agent pods are listed (the uncovered nodes' pods follow: see `pods`). */
  start(): Promise<void>;
  stop(): Promise<void>;
  readonly stats: InformerStats;
  /** The pods on nodes without a ready agent; undefined until every one of those nodes' pods is listed. */
  pods(): V1Pod[] | undefined;
  /** Nodes without a ready agent now (for logs and tests). */
  uncovered(): string[];
}

const agentSelector = Object.entries(AGENT_SELECTOR)
  .map(([k, v]) => `${k}=${v}`)
  .join(",");

/** Only what coverage reads of an agent pod: its node and its Ready condition. */
function agentPodFacts(pod: V1Pod): V1Pod {
  const { name, namespace, resourceVersion, deletionTimestamp } = pod.metadata ?? {};
  return {
    metadata: { name, namespace, resourceVersion, ...(deletionTimestamp ? { deletionTimestamp } : {}) },
    spec: { nodeName: pod.spec?.nodeName, containers: [] },
    status: { conditions: (pod.status?.conditions ?? []).filter((c) => c.type === "Ready") },
  } as V1Pod;
}

/**
 * When each node was first seen without a ready agent: one counts as uncovered once that has
 * lasted the grace period, and is forgotten once it has a ready agent again.
 */
export class UncoveredGrace {
  private readonly since = new Map<string, number>();
  private readonly graceMs: number;

  constructor(graceMs: number) {
    this.graceMs = graceMs;
  }

  /**
   * Of `candidates` (the nodes without a ready agent now), those past their grace, and when the
   * next one's grace ends (`nextAt`, undefined when none is waiting).
   */
  due(candidates: ReadonlySet<string>, now: number): { due: Set<string>; nextAt: number | undefined } {
    for (const node of [...this.since.keys()]) if (!candidates.has(node)) this.since.delete(node);
    const due = new Set<string>();
    let nextAt = Number.POSITIVE_INFINITY;
    for (const node of candidates) {
      const first = this.since.get(node) ?? now;
      this.since.set(node, first);
      if (now - first >= this.graceMs) due.add(node);
      else nextAt = Math.min(nextAt, first + this.graceMs);
    }
    return { due, nextAt: nextAt === Number.POSITIVE_INFINITY ? undefined : nextAt };
  }
}

/** The pod watches of the uncovered nodes, one per node, and the stats of those already ended. */
class NodePodWatches {
  private readonly perNode = new Map<string, { informer: Informer<V1Pod>; synced: boolean }>();
  readonly retiredStats: InformerStats = {
    lists: 0,
    listPages: 0,
    watches: 0,
    relists: 0,
    errors: 0,
    events: 0,
  };
  private readonly o: FeedOptions;
  private readonly onChange: () => void;
  private readonly stopped: () => boolean;

  constructor(o: FeedOptions, onChange: () => void, stopped: () => boolean) {
    this.o = o;
    this.onChange = onChange;
    this.stopped = stopped;
  }

  /** Starts a watch for each node of `want` without one, ends those of the nodes not in it. */
  set(want: ReadonlySet<string>): void {
    for (const node of [...this.perNode.keys()]) if (!want.has(node)) this.retire(node);
    for (const node of want) {
      if (this.perNode.has(node)) continue;
      const informer = nodePodFeed(node, () => this.onChange(), this.o);
      const entry = { informer, synced: false };
      this.perNode.set(node, entry);
      void informer.start().then(() => {
        entry.synced = true;
        if (!this.stopped() && this.perNode.get(node) === entry) this.onChange();
      });
    }
  }

  /** Their pods; undefined until every watch has listed. */
  pods(): V1Pod[] | undefined {
    if ([...this.perNode.values()].some((e) => !e.synced)) return undefined;
    return [...this.perNode.values()].flatMap((e) => e.informer.list());
  }

  nodes(): string[] {
    return [...this.perNode.keys()].sort();
  }

  informers(): Informer<V1Pod>[] {
    return [...this.perNode.values()].map((e) => e.informer);
  }

  /** Forgets every watch (the caller stops them); returns them. */
  clear(): Informer<V1Pod>[] {
    const all = this.informers();
    this.perNode.clear();
    return all;
  }

  private retire(node: string): void {
    const entry = this.perNode.get(node);
    if (!entry) return;
    this.perNode.delete(node);
    for (const [k, v] of Object.entries(entry.informer.stats))
      this.retiredStats[k as keyof InformerStats] += v;
    void entry.informer.stop();
  }
}

/**
 * Watches coverage in `namespace` (the agent's); `onChange` runs whenever the uncovered pods may
 * have changed (the pods controller then recomputes its policies' NodesCovered).
 */
export function watchCoverage(
  namespace: string,
  onChange: () => void,
  o: FeedOptions & {
    /** How long a node stays without a ready agent before it counts as uncovered (default 60 s). */
    graceMs?: number;
  },
): CoverageWatch {
  const grace = new UncoveredGrace(o.graceMs ?? 60_000);
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  let baseSynced = false;
  const watches = new NodePodWatches(o, onChange, () => stopped);
  const nodes = feed<V1Node>(
    NODES,
    (type) => {
      // A Node's own updates (status, heartbeats) change nothing here: only its arrival or departure.
      if (type !== "MODIFIED") refresh();
    },
    {
      ...o,
      transform: (n) => ({
        metadata: { name: n.metadata?.name, resourceVersion: n.metadata?.resourceVersion },
      }),
    },
  );
  const agentPods = feed<V1Pod>({ ...PODS, namespace }, () => refresh(), {
    ...o,
    labelSelector: agentSelector,
    transform: agentPodFacts,
  });

  /** Starts a pod watch for each newly uncovered node, ends those of nodes covered again. */
  function refresh(): void {
    if (stopped || !baseSynced) return;
    const names = nodes.list().flatMap((n) => (n.metadata?.name ? [n.metadata.name] : []));
    const now = Date.now();
    const { due, nextAt } = grace.due(uncoveredNodes(names, agentPods.list()), now);
    clearTimeout(timer);
    timer = nextAt === undefined ? undefined : setTimeout(refresh, nextAt - now).unref();
    watches.set(due);
    onChange();
  }

  return {
    async start() {
      await Promise.all([nodes.start(), agentPods.start()]);
      baseSynced = true;
      refresh();
    },
    async stop() {
      stopped = true;
      clearTimeout(timer);
      const all = [nodes, agentPods, ...watches.clear()];
      await Promise.all(all.map((i) => i.stop()));
    },
    get stats() {
      const out = { ...watches.retiredStats };
      for (const i of [nodes, agentPods, ...watches.informers()])
        for (const [k, v] of Object.entries(i.stats)) out[k as keyof InformerStats] += v;
      return out;
    },
    pods: () => (baseSynced ? watches.pods() : undefined),
    uncovered: () => watches.nodes(),
  };
}
