/**
 * What the discover controller knows, from its watches: the HivePolicies, the pods of this node
 * (also by the uid their cgroups carry), this node's HiveData and the last re-resolve request seen
 * on each. Each watch event is taken here, and says whether it asks for a pass.
 */
import type { V1Pod } from "@kubernetes/client-node";
import type { HiveData } from "../../api/data.ts";
import { ANNOTATION_RESOLVE_REQUEST, LABEL_NODE } from "../../api/meta.ts";
import type { HivePolicy } from "../../api/policy.ts";
import type { Logger } from "../log.ts";
import { KubeletPodUids } from "./kubelet-pod-uids.ts";
import { objectKey, specProblems, type WatchEventType } from "./ports.ts";

/** What a HiveData event was: another node's, a deletion, a store, or a re-resolve request not seen before. */
export type DataEventKind = "ignored" | "deleted" | "stored" | "requested";

export class DiscoverCache {
  readonly policies = new Map<string, HivePolicy>();
  readonly pods = new Map<string, V1Pod>();
  /** The same pods by the uid their cgroups carry: what an access attributed by cgroup names. */
  readonly podUids: KubeletPodUids;
  /** This node's HiveData as last seen, by namespace/name (a pass's writes update it too). */
  readonly data = new Map<string, HiveData>();
  private readonly resolveRequests = new Map<string, string>();
  private readonly nodeName: string;
  private readonly log: Logger;

  constructor(nodeName: string, log: Logger) {
    this.nodeName = nodeName;
    this.log = log;
    this.podUids = new KubeletPodUids(nodeName, log);
  }

  /**
   * Takes a policy event (one with an invalid spec counts as deleted); false when it changed
   * neither the traps nor the deletion state (a status or finalizer write): no pass is needed.
   */
  onPolicy(eventType: WatchEventType, policy: HivePolicy): boolean {
    let type = eventType;
    const problems = type === "DELETED" ? undefined : specProblems(policy);
    if (problems) {
      this.log.warn("ignoring a HivePolicy with an invalid spec", { policy: objectKey(policy), problems });
      type = "DELETED";
    }
    const key = objectKey(policy);
    const had = this.policies.get(key);
    if (type === "DELETED") this.policies.delete(key);
    else this.policies.set(key, policy);
    const unchanged =
      type === "MODIFIED" &&
      had?.metadata.generation === policy.metadata.generation &&
      Boolean(had?.metadata.deletionTimestamp) === Boolean(policy.metadata.deletionTimestamp);
    return !unchanged;
  }

  /** Takes a pod event; false for another node's pod (a defence: the watch is node-scoped already). */
  onPod(type: WatchEventType, pod: V1Pod): boolean {
    if (pod.spec?.nodeName !== this.nodeName && type !== "DELETED") return false;
    if (type === "DELETED") this.pods.delete(objectKey(pod));
    else this.pods.set(objectKey(pod), pod);
    this.podUids.onPod(type, pod);
    return true;
  }

  onData(type: WatchEventType, d: HiveData): DataEventKind {
    if (d.metadata.labels?.[LABEL_NODE] !== this.nodeName) return "ignored";
    const key = objectKey(d);
    if (type === "DELETED") {
      this.data.delete(key);
      this.resolveRequests.delete(key);
      return "deleted";
    }
    this.data.set(key, d);
    const request = d.metadata.annotations?.[ANNOTATION_RESOLVE_REQUEST];
    if (request === undefined || this.resolveRequests.get(key) === request) return "stored";
    this.resolveRequests.set(key, request);
    return "requested";
  }
}
