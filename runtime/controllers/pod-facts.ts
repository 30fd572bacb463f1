/**
 * What discover records in a HiveData about the trapped file's pod, for its alerts (HiveData
 * `spec.pod`): labels, owning workload and the container's image. Written by the node that saw
 * the pod, since the loader of a shared kernel may run on another node, whose agent never
 * watches that pod.
 */
import type { V1OwnerReference, V1Pod } from "@kubernetes/client-node";
import { MAX_POD_LABELS, type PodFacts } from "../../api/data.ts";
import type { Workload } from "../../api/meta.ts";

/** The label the Deployment controller puts on its ReplicaSets' pods, also the suffix of the ReplicaSet's name. */
export const POD_TEMPLATE_HASH = "pod-template-hash";

/**
 * The pod's workload: its controller owner, and for a ReplicaSet made by a Deployment the
 * Deployment. The agent may not read ReplicaSets (least privilege), so the Deployment is told
 * by the convention the Deployment controller follows: the ReplicaSet is named
 * `<deployment>-<pod-template-hash>` and labels its pods with that hash. A ReplicaSet that does
 * not follow it is reported as itself.
 */
export function workloadOf(pod: V1Pod): Workload | undefined {
  const owners: V1OwnerReference[] = pod.metadata?.ownerReferences ?? [];
  const owner = owners.find((o) => o.controller) ?? owners[0];
  if (!owner?.kind || !owner.name) return undefined;
  const hash = pod.metadata?.labels?.[POD_TEMPLATE_HASH];
  if (
    owner.kind === "ReplicaSet" &&
    owner.apiVersion?.startsWith("apps/") &&
    hash &&
    owner.name.length > hash.length + 1 &&
    owner.name.endsWith(`-${hash}`)
  ) {
    return { kind: "Deployment", name: owner.name.slice(0, -(hash.length + 1)) };
  }
  return { kind: owner.kind, name: owner.name };
}

/** The first MAX_POD_LABELS labels by name: an alert's size stays bounded whatever a pod carries. */
function boundedLabels(labels: Record<string, string> | undefined): Record<string, string> | undefined {
  const keys = Object.keys(labels ?? {}).sort();
  if (keys.length === 0) return undefined;
  return Object.fromEntries(
    keys.slice(0, MAX_POD_LABELS).map((k) => [k, (labels as Record<string, string>)[k] as string]),
  );
}

/** The facts for one container of `pod`; undefined when there are none. */
export function podFacts(pod: V1Pod, containerName: string): PodFacts | undefined {
  const facts: PodFacts = {};
  const labels = boundedLabels(pod.metadata?.labels);
  if (labels) facts.labels = labels;
  const workload = workloadOf(pod);
  if (workload) facts.workload = workload;
  const image = pod.spec?.containers?.find((c) => c.name === containerName)?.image;
  if (image) facts.image = image;
  return Object.keys(facts).length > 0 ? facts : undefined;
}
