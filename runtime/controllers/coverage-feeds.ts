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
  const graceMs = o.graceMs ?? 60_000;
  /** When this role first saw each node without a ready agent (forgotten once it has one). */
  const since = new Map<string, number>();
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  let baseSynced = false;
  const perNode = new Map<string, { informer: Informer<V1Pod>; synced: boolean }>();
  const retiredStats: InformerStats = {
    lists: 0,
    listPages: 0,
    watches: 0,
    relists: 0,
    errors: 0,
    events: 0,
  };

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

  function retire(node: string): void {
    const entry = perNode.get(node);
    if (!entry) return;
    perNode.delete(node);
    for (const [k, v] of Object.entries(entry.informer.stats)) retiredStats[k as keyof InformerStats] += v;
    void entry.informer.stop();
  }

  /** Starts a pod watch for each newly uncovered node, ends those of nodes covered again. */
  function refresh(): void {
    if (stopped || !baseSynced) return;
    const names = nodes.list().flatMap((n) => (n.metadata?.name ? [n.metadata.name] : []));
    const now = Date.now();
    const candidates = uncoveredNodes(names, agentPods.list());
    for (const node of [...since.keys()]) if (!candidates.has(node)) since.delete(node);
    const want = new Set<string>();
    let nextDue = Number.POSITIVE_INFINITY;
    for (const node of candidates) {
      const first = since.get(node) ?? now;
      since.set(node, first);
      if (now - first >= graceMs) want.add(node);
      else nextDue = Math.min(nextDue, first + graceMs);
    }
    clearTimeout(timer);
    timer = undefined;
    if (nextDue !== Number.POSITIVE_INFINITY) timer = setTimeout(refresh, nextDue - now).unref();
    for (const node of [...perNode.keys()]) if (!want.has(node)) retire(node);
    for (const node of want) {
      if (perNode.has(node)) continue;
      const informer = nodePodFeed(node, () => onChange(), o);
      const entry = { informer, synced: false };
      perNode.set(node, entry);
      void informer.start().then(() => {
        entry.synced = true;
        if (!stopped && perNode.get(node) === entry) onChange();
      });
    }
    onChange();
  }

  const sum = (): InformerStats => {
    const out = { ...retiredStats };
    for (const i of [nodes, agentPods, ...[...perNode.values()].map((e) => e.informer)])
      for (const [k, v] of Object.entries(i.stats)) out[k as keyof InformerStats] += v;
    return out;
  };

  return {
    async start() {
      await Promise.all([nodes.start(), agentPods.start()]);
      baseSynced = true;
      refresh();
    },
    async stop() {
      stopped = true;
      clearTimeout(timer);
      const all = [nodes, agentPods, ...[...perNode.values()].map((e) => e.informer)];
      perNode.clear();
      await Promise.all(all.map((i) => i.stop()));
    },
    get stats() {
      return sum();
    },
    pods() {
      if (!baseSynced || [...perNode.values()].some((e) => !e.synced)) return undefined;
      return [...perNode.values()].flatMap((e) => e.informer.list());
    },
    uncovered: () => [...perNode.keys()].sort(),
  };
}
