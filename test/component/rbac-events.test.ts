/**
 * The agent's `events` grant is derived from what its code does: every Event call of
 * client-node's CoreV1Api (and every informer over events) in runtime/ maps to one RBAC verb,
 * and the ClusterRole grants exactly those verbs — no fewer (the agent would get 403s), no more.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { clusterRules, namespaceRules } from "../../component/builders/rbac.ts";

const root = join(import.meta.dirname, "../..");

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...sources(path));
    else if (entry.name.endsWith(".ts") && !entry.name.endsWith(".test.ts")) out.push(path);
  }
  return out;
}

/** CoreV1Api Event methods → the verb the API server authorizes them as. */
const METHOD_VERBS: [RegExp, string][] = [
  [/\bcreateNamespacedEvent\b/, "create"],
  [/\bpatchNamespacedEvent\b/, "patch"],
  [/\breplaceNamespacedEvent\b/, "update"],
  [/\bdeleteNamespacedEvent\b/, "delete"],
  [/\bdeleteCollectionNamespacedEvent\b/, "deletecollection"],
  [/\breadNamespacedEvent\b/, "get"],
  [/\blistNamespacedEvent\b|\blistEventForAllNamespaces\b/, "list"],
];

/** An informer (list + watch) over core events: `feed<CoreV1Event>(EVENTS, …)` in the controllers' feeds. */
const EVENT_INFORMER = /\bfeed<CoreV1Event>\(\s*EVENTS\b/;

function usedEventVerbs(): { verbs: Set<string>; where: Record<string, string[]>; eventsV1: string[] } {
  const verbs = new Set<string>();
  const where: Record<string, string[]> = {};
  const eventsV1: string[] = [];
  const note = (verb: string, file: string) => {
    verbs.add(verb);
    where[verb] = [...new Set([...(where[verb] ?? []), relative(root, file)])];
  };
  for (const file of sources(join(root, "runtime"))) {
    const text = readFileSync(file, "utf8");
    for (const [pattern, verb] of METHOD_VERBS) if (pattern.test(text)) note(verb, file);
    if (EVENT_INFORMER.test(text)) {
      note("list", file);
      note("watch", file);
    }
    if (/\bEventsV1Api\b|events\.k8s\.io/.test(text)) eventsV1.push(relative(root, file));
  }
  return { verbs, where, eventsV1 };
}

describe("the agent's events permissions", () => {
  const used = usedEventVerbs();

  it("finds the agent's Event calls at all (the scan is not blind)", () => {
    // The alert path's Event on the pod is the reason the grant exists.
    expect(used.where.create).toContain("runtime/alerts/pod-event-writer.ts");
    expect(used.where.patch).toContain("runtime/alerts/pod-event-writer.ts");
  });

  it("grants core events exactly the verbs the runtime uses, cluster-wide", () => {
    const granted = clusterRules()
      .filter((r) => r.apiGroups.includes("") && r.resources.includes("events"))
      .flatMap((r) => {
        // Events are written in the pods' and policies' namespaces: no resourceNames can narrow it.
        expect(r.resourceNames).toBeUndefined();
        return r.verbs;
      });
    expect(new Set(granted), JSON.stringify(used.where)).toEqual(used.verbs);
    // Not granted again (or instead) in the agent's own namespace only.
    expect(namespaceRules(undefined).some((r) => r.resources.includes("events"))).toBe(false);
  });

  it("grants events.k8s.io only if the runtime uses that API", () => {
    const granted = clusterRules().some((r) => r.apiGroups.includes("events.k8s.io"));
    expect(granted).toBe(used.eventsV1.length > 0);
  });
});
