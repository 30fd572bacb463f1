/**
 * This node's pods by the uid the kubelet names them by in cgroups (`pod<uid>`): what an access
 * attributed by its cgroup names. For a pod from the API server that is its `metadata.uid`; for a
 * static pod (a manifest on the node) it is the 32-hex hash the kubelet gave it, which its mirror
 * pod on the API server carries as the `kubernetes.io/config.mirror` annotation (its own uid is
 * another). Anyone who may create pods may set that annotation on a pod bound to this node, so a
 * uid claimed by two pods names neither: a tenant cannot take a static pod's accesses (and send
 * them to its own callback) by copying the hash.
 * Deleted pods stay nameable for DELETED_POD_MS: an access made just before a tenant deleted its
 * pod may still wait in the ring, and must not go unattributed for that. Likewise a pod's labels
 * are those it had at the access: a tenant who relabels its pod right after reading a trapped
 * file (so that no trap selects it when the event is routed) is still alerted, from the version
 * of the pod kept for RELABELED_POD_MS after the change was seen.
 */
import type { V1Pod } from "@kubernetes/client-node";
import type { Logger } from "../log.ts";
import { sameRecord } from "./hive-data.ts";

export const MIRROR_ANNOTATION = "kubernetes.io/config.mirror";
const STATIC_UID = /^[0-9a-f]{32}$/;
const DELETED_POD_MS = 60_000;
const RELABELED_POD_NS = 60_000_000_000n;
/** Earlier versions kept per pod, at most: a pod relabelled faster than that keeps the newest. */
const MAX_EARLIER_VERSIONS = 8;

/** The uid the kubelet uses for `pod` in cgroup paths (the static pod's hash for a mirror pod). */
export function kubeletPodUid(pod: V1Pod, nodeName: string): string | undefined {
  const mirror = pod.metadata?.annotations?.[MIRROR_ANNOTATION];
  if (mirror !== undefined) {
    const ownedByNode = (pod.metadata?.ownerReferences ?? []).some(
      (o) => o.kind === "Node" && o.name === nodeName,
    );
    return STATIC_UID.test(mirror) && ownedByNode ? mirror : undefined;
  }
  return pod.metadata?.uid || undefined;
}

export class KubeletPodUids {
  /** kubelet uid → the pods claiming it, by their own metadata.uid. */
  private readonly claims = new Map<string, Map<string, V1Pod>>();
  /** metadata.uid of a deleted pod → when, and the kubelet uid it claimed. */
  private readonly deleted = new Map<string, { at: number; key: string }>();
  /**
   * metadata.uid → the pod's versions before each change of its labels, oldest first, each with
   * when (CLOCK_MONOTONIC ns, the kernel's clock of an access) the change was seen.
   */
  private readonly earlier = new Map<string, { pod: V1Pod; untilNs: bigint }[]>();
  private readonly warned = new Set<string>();

  private readonly nodeName: string;
  private readonly log: Pick<Logger, "warn">;
  private readonly nowNs: () => bigint;

  constructor(
    nodeName: string,
    log: Pick<Logger, "warn">,
    nowNs: () => bigint = () => process.hrtime.bigint(),
  ) {
    this.nodeName = nodeName;
    this.log = log;
    this.nowNs = nowNs;
  }

  /** A pod of this node was added, changed or deleted. */
  onPod(type: "ADDED" | "MODIFIED" | "DELETED", pod: V1Pod): void {
    const own = pod.metadata?.uid;
    const key = kubeletPodUid(pod, this.nodeName);
    if (own && key) {
      if (type === "DELETED") this.deleted.set(own, { at: Date.now(), key });
      else {
        const claimants = this.claims.get(key) ?? new Map<string, V1Pod>();
        const was = claimants.get(own);
        // Labels are what a trap's match reads of a pod.
        if (was && !sameRecord(was.metadata?.labels, pod.metadata?.labels)) this.keepEarlier(own, was);
        claimants.set(own, pod);
        this.claims.set(key, claimants);
        this.deleted.delete(own);
        if (claimants.size > 1) this.warnAmbiguous(key, claimants);
      }
    }
    for (const [gone, { at, key: claimed }] of this.deleted) {
      if (Date.now() - at < DELETED_POD_MS) break; // in deletion order: the rest are newer
      this.deleted.delete(gone);
      const claimants = this.claims.get(claimed);
      claimants?.delete(gone);
      if (claimants?.size === 0) this.claims.delete(claimed);
      this.earlier.delete(gone);
    }
    this.forgetEarlier();
  }

  /**
   * The one pod the kubelet names `uid`; undefined when none or several claim it. With `atNs`
   * (when the access was made, CLOCK_MONOTONIC), the pod as it was then: its labels before a
   * change seen after the access.
   */
  podByUid(uid: string, atNs?: bigint): V1Pod | undefined {
    const claimants = this.claims.get(uid);
    if (claimants?.size !== 1) return undefined;
    const pod: V1Pod | undefined = claimants.values().next().value;
    if (atNs === undefined || !pod?.metadata?.uid) return pod;
    return this.earlier.get(pod.metadata.uid)?.find((v) => v.untilNs > atNs)?.pod ?? pod;
  }

  private keepEarlier(own: string, pod: V1Pod): void {
    const versions = this.earlier.get(own) ?? [];
    versions.push({ pod, untilNs: this.nowNs() });
    if (versions.length > MAX_EARLIER_VERSIONS) versions.shift();
    this.earlier.set(own, versions);
  }

  /** Versions replaced longer ago than RELABELED_POD_NS: no access still waiting predates them. */
  private forgetEarlier(): void {
    const horizon = this.nowNs() - RELABELED_POD_NS;
    for (const [own, versions] of this.earlier) {
      while (versions.length > 0 && (versions[0]?.untilNs ?? 0n) < horizon) versions.shift();
      if (versions.length === 0) this.earlier.delete(own);
    }
  }

  private warnAmbiguous(key: string, claimants: Map<string, V1Pod>): void {
    if (this.warned.has(key)) return;
    if (this.warned.size > 1000) this.warned.clear();
    this.warned.add(key);
    this.log.warn(
      "several pods claim one static pod's uid: accesses from its containers are not attributed",
      {
        uid: key,
        pods: [...claimants.values()].map((p) => `${p.metadata?.namespace}/${p.metadata?.name}`),
        hint: `a pod that sets ${MIRROR_ANNOTATION} without being the static pod's mirror: delete it`,
      },
    );
  }
}
