/**
 * The informer's cache: objects by `namespace/name`, changed by whole LISTs and by watch events.
 * Each change returns the deltas it made, for the handlers; delivering them is not its job.
 */
import type { KubernetesObject } from "@kubernetes/client-node";
import { objectKey } from "./object-key.ts";

/** One change the handlers hear about. */
export type Delta<T> =
  | { kind: "add"; obj: T }
  | { kind: "update"; obj: T; old: T }
  | { kind: "delete"; obj: T };

export class InformerStore<T extends KubernetesObject> {
  private items = new Map<string, T>();

  get(name: string, namespace?: string): T | undefined {
    return this.items.get(`${namespace ?? ""}/${name}`);
  }

  list(namespace?: string): T[] {
    const all = [...this.items.values()];
    return namespace === undefined ? all : all.filter((o) => o.metadata?.namespace === namespace);
  }

  /** Takes a complete LIST as the new contents; returns what changed since the last one. */
  replace(items: T[]): Delta<T>[] {
    const next = new Map<string, T>();
    for (const item of items) next.set(objectKey(item), item);
    const old = this.items;
    this.items = next;
    return listDeltas(old, next);
  }

  /** Applies one watch event (ADDED, MODIFIED, DELETED; others change nothing). */
  apply(type: string, obj: T): Delta<T> | undefined {
    const key = objectKey(obj);
    const before = this.items.get(key);
    if (type === "DELETED") {
      this.items.delete(key);
      return { kind: "delete", obj };
    }
    if (type !== "ADDED" && type !== "MODIFIED") return undefined;
    this.items.set(key, obj);
    return before ? { kind: "update", obj, old: before } : { kind: "add", obj };
  }
}

/**
 * The adds, updates and deletes between two LISTs, in list order (deletes last): what a watch
 * would have delivered had it not missed them. An unchanged resourceVersion is no update.
 */
export function listDeltas<T extends KubernetesObject>(
  old: Map<string, T>,
  next: Map<string, T>,
): Delta<T>[] {
  const deltas: Delta<T>[] = [];
  for (const [key, obj] of next) {
    const before = old.get(key);
    if (!before) deltas.push({ kind: "add", obj });
    else if (before.metadata?.resourceVersion !== obj.metadata?.resourceVersion)
      deltas.push({ kind: "update", obj, old: before });
  }
  for (const [key, obj] of old) if (!next.has(key)) deltas.push({ kind: "delete", obj });
  return deltas;
}
