/**
 * Whether an access Event comes from the node of the pod it names. Admission lets each node's
 * agent write access Events naming only itself as `reportingInstance`, but for any pod: a
 * compromised node could make every other node's pods `fail` in the reports. So an Event counts
 * only when the API server says its pod runs on that node (and, when the Event names the pod's
 * uid, that it is that pod, not an earlier one of the same name). Each pod is looked up once
 * (its node never changes); its Events wait in order meanwhile. A pod that is gone cannot be
 * checked, and its Events are not counted (its alerts were delivered all the same).
 */
import type { CoreV1Event } from "@kubernetes/client-node";
import type { WatchEventType } from "../controllers/ports.ts";
import type { Logger } from "../log.ts";

export interface PodPlacement {
  node: string;
  uid?: string;
}

/** Where a pod runs, from the API server; undefined when there is no such pod. */
export type PlacementLookup = (namespace: string, name: string) => Promise<PodPlacement | undefined>;

type Entry = [WatchEventType, CoreV1Event];

export interface AccessOrigin {
  /** Passes `event` to `fold` once its origin is checked (at once when the pod is known). */
  check(type: WatchEventType, event: CoreV1Event): void;
  /** Forgets the pods not in `keep` (namespace/name): a later Event looks them up again. */
  retain(keep: ReadonlySet<string>): void;
  readonly rejected: number;
}

export function createAccessOrigin(options: {
  lookup: PlacementLookup;
  fold: (type: WatchEventType, event: CoreV1Event) => void;
  /** Called after Events that waited for a lookup were folded. */
  onFolded: () => void;
  log: Logger;
}): AccessOrigin {
  const known = new Map<string, PodPlacement | null>();
  const waiting = new Map<string, Entry[]>();
  const warned = new Set<string>();
  let rejected = 0;

  const podKey = (event: CoreV1Event) => `${event.involvedObject?.namespace}/${event.involvedObject?.name}`;

  /** Folds `entry` if its origin holds against `placement`; counts and says it when not. */
  function admit([type, event]: Entry, placement: PodPlacement | null): void {
    // An Event's removal only forgets what it added: nothing to check.
    const node = event.reportingInstance ?? "";
    const uid = event.involvedObject?.uid;
    const holds =
      placement !== null && placement.node === node && (!uid || !placement.uid || uid === placement.uid);
    if (type === "DELETED" || holds) {
      options.fold(type, event);
      return;
    }
    rejected += 1;
    const name = `${event.metadata?.namespace}/${event.metadata?.name}`;
    if (warned.has(name)) return;
    if (warned.size > 10_000) warned.clear();
    warned.add(name);
    options.log.warn("an access Event names a pod that its node does not run: not counted in the reports", {
      event: name,
      pod: podKey(event),
      reportingNode: node,
      podNode: placement?.node ?? null,
      hint: "the node's agent wrote an access for another node's pod: check that node",
    });
  }

  function lookUp(key: string, namespace: string, name: string): void {
    options
      .lookup(namespace, name)
      .then(
        (p) => p ?? null,
        (error: unknown) => {
          options.log.warn("cannot look up an accessed pod's node: its access Events are not counted", {
            pod: key,
            error,
          });
          return undefined;
        },
      )
      .then((placement) => {
        const entries = waiting.get(key) ?? [];
        waiting.delete(key);
        // A failed lookup is not remembered: the pod's next Event asks again.
        if (placement !== undefined) known.set(key, placement);
        for (const entry of entries) admit(entry, placement ?? null);
        options.onFolded();
      });
  }

  return {
    check(type, event) {
      const key = podKey(event);
      const queue = waiting.get(key);
      if (queue) {
        queue.push([type, event]);
        return;
      }
      const placement = known.get(key);
      const uid = event.involvedObject?.uid;
      // Not looked up yet, or a pod of that name that is not the one looked up (recreated).
      const stale = placement === undefined || (uid && placement?.uid && placement.uid !== uid);
      if (!stale || type === "DELETED") {
        admit([type, event], placement ?? null);
        return;
      }
      known.delete(key);
      waiting.set(key, [[type, event]]);
      lookUp(key, event.involvedObject?.namespace ?? "", event.involvedObject?.name ?? "");
    },
    retain(keep) {
      for (const key of known.keys()) if (!keep.has(key)) known.delete(key);
    },
    get rejected() {
      return rejected;
    },
  };
}
