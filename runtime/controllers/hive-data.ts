/**
 * Builds the HiveData for one trap × container from what discovery found, and compares
 * HiveData objects so that writes happen only on change. Deterministic names
 * (api/ids.ts) make a repeated discovery an idempotent no-op.
 */
import type { V1Pod } from "@kubernetes/client-node";
import type { Executable, HiveData } from "../../api/data.ts";
import { dataName } from "../../api/ids.ts";
import {
  ACCESS_KINDS,
  ANNOTATION_RESOLVE_REQUEST,
  API_VERSION,
  type DataAnnotations,
  GROUP,
  KIND_DATA,
  LABEL_KERNEL_ID,
  LABEL_MANAGED_BY,
  LABEL_NODE,
  LABEL_POLICY,
  LABEL_POLICY_NAMESPACE,
  LABEL_TRAP_ID,
  MANAGED_BY,
} from "../../api/meta.ts";
import type { HivePolicy, HiveTrap } from "../../api/policy.ts";
import type { FileKey } from "../kernel/contract.ts";
import { podFacts } from "./pod-facts.ts";

/**
 * The directory holding the trapped file, `major:minor:ino`: the loader watches it so a
 * rename over the file or a delete + re-create leads to re-resolution.
 */
export const ANNOTATION_PARENT = `${GROUP}/parent`;

/**
 * "true" while the trapped file is missing from its container (deleted, maybe about to be
 * re-created): the loader watches only the directory; the alert path ignores the object.
 */
export const ANNOTATION_MISSING = `${GROUP}/file-missing`;

/**
 * "true" on the HiveData of a trapped file in an image layer of this node (not yet of any one
 * container): every container of the image reaches it, and the loader tells them apart by the
 * accessing task's cgroup (layer-routing.ts). Named by trap × node × file.
 */
export const ANNOTATION_IMAGE_LAYER = `${GROUP}/image-layer`;

export function isLayerData(d: HiveData): boolean {
  return d.metadata.annotations?.[ANNOTATION_IMAGE_LAYER] === "true";
}

export function isMissing(d: HiveData): boolean {
  return d.metadata.annotations?.[ANNOTATION_MISSING] === "true";
}

/** The HiveData as it must look while its file is missing (same identity, same directory). */
export function markMissing(d: HiveData): HiveData {
  const { [ANNOTATION_RESOLVE_REQUEST]: _request, ...annotations } = d.metadata.annotations ?? {};
  return {
    ...d,
    metadata: {
      name: d.metadata.name,
      namespace: d.metadata.namespace,
      labels: d.metadata.labels,
      annotations: { ...annotations, [ANNOTATION_MISSING]: "true" },
    } as HiveData["metadata"],
  };
}

export function keyText(key: FileKey): string {
  return `${key.major}:${key.minor}:${key.ino}`;
}

export function parseKeyText(text: string | undefined): FileKey | undefined {
  const m = text?.match(/^(\d+):(\d+):(\d+)$/);
  if (!m) return undefined;
  return { major: Number(m[1]), minor: Number(m[2]), ino: BigInt(m[3] as string) };
}

export interface DataInput {
  policy: HivePolicy;
  trap: HiveTrap;
  trapId: string;
  pod: V1Pod;
  container: { name: string; containerId: string };
  kernelId: string;
  nodeName: string;
  /** The monitor's namespace: every HiveData lives there, where only the agent may write it. */
  namespace: string;
  file: FileKey;
  parent: FileKey;
  /** The writer's Node: its HiveData goes with it when the node leaves the cluster. */
  owner?: NodeOwner | undefined;
  /** The files at the allow entries' exact paths in the same container (discover found them). */
  executables?: readonly Executable[];
  /** The image layer's file beneath the container's, when the kernel's check reached it next. */
  imageFile?: FileKey | undefined;
}

/**
 * The Node as the owner of its agent's HiveData. A namespaced object may name a cluster-scoped
 * owner: when a node is deleted, the garbage collector removes what its agent wrote, which no
 * other agent may delete (admission keeps each agent to its own node's HiveData).
 */
export interface NodeOwner {
  apiVersion: "v1";
  kind: "Node";
  name: string;
  uid: string;
}

/** A file's identity as HiveData spells it (the trapped file's, and each of `executables`). */
export function fileIdentity(key: FileKey): { "inode-no": string; device: { major: number; minor: number } } {
  return { "inode-no": key.ino.toString(), device: { major: key.major, minor: key.minor } };
}

/** The labels every HiveData carries: its trap, kernel, node and policy (the loader's and pods role's selectors). */
function dataLabels(input: { policy: HivePolicy; trapId: string; kernelId: string; nodeName: string }) {
  return {
    [LABEL_TRAP_ID]: input.trapId,
    [LABEL_KERNEL_ID]: input.kernelId,
    [LABEL_NODE]: input.nodeName,
    [LABEL_POLICY]: input.policy.metadata.name ?? "",
    [LABEL_POLICY_NAMESPACE]: input.policy.metadata.namespace ?? "default",
    [LABEL_MANAGED_BY]: MANAGED_BY,
  };
}

export function buildHiveData(input: DataInput): HiveData {
  const { policy, trap, pod, container } = input;
  const podName = pod.metadata?.name ?? "";
  const facts = podFacts(pod, container.name);
  const annotations: DataAnnotations & Record<string, string> = {
    container_id: container.containerId,
    container_name: container.name,
    hive_policy_name: policy.metadata.name ?? "",
    namespace: pod.metadata?.namespace ?? "",
    node_name: input.nodeName,
    path: trap.path,
    pod_ip: pod.status?.podIP ?? "",
    pod_name: podName,
    pod_uid: pod.metadata?.uid ?? "",
    [ANNOTATION_PARENT]: keyText(input.parent),
  };
  return {
    apiVersion: API_VERSION as HiveData["apiVersion"],
    kind: KIND_DATA as HiveData["kind"],
    metadata: {
      name: dataName(input.trapId, container.containerId, podName),
      // In the monitor's namespace, not the pod's: the agent's Role reaches only there, and no
      // tenant can write HiveData beside its pods. No Pod ownerReference (a namespaced owner must
      // share the namespace): discover removes the HiveData of its node's finished or deleted
      // pods, and the Node owns it for when the node itself is gone.
      namespace: input.namespace,
      ...(input.owner ? { ownerReferences: [{ ...input.owner }] } : {}),
      labels: dataLabels(input),
      annotations,
    },
    spec: {
      ...fileIdentity(input.file),
      "kernel-id": input.kernelId,
      // Informational (the reference design's field): the loader watches the live trap's accesses.
      accesses: [...(trap.accesses ?? ACCESS_KINDS)],
      ...(input.executables && input.executables.length > 0 ? { executables: [...input.executables] } : {}),
      ...(facts ? { pod: facts } : {}),
      ...(input.imageFile ? { "image-file": fileIdentity(input.imageFile) } : {}),
    },
  };
}

export interface LayerDataInput {
  policy: HivePolicy;
  trap: HiveTrap;
  trapId: string;
  kernelId: string;
  nodeName: string;
  namespace: string;
  file: FileKey;
  owner?: NodeOwner | undefined;
}

/** The HiveData of a trapped file found in an image layer of this node (image-layers.ts). */
export function buildLayerData(input: LayerDataInput): HiveData {
  const { policy, trap } = input;
  return {
    apiVersion: API_VERSION as HiveData["apiVersion"],
    kind: KIND_DATA as HiveData["kind"],
    metadata: {
      name: dataName(input.trapId, `image-layer:${keyText(input.file)}`, `layer-${input.nodeName}`),
      namespace: input.namespace,
      ...(input.owner ? { ownerReferences: [{ ...input.owner }] } : {}),
      labels: dataLabels(input),
      annotations: {
        [ANNOTATION_IMAGE_LAYER]: "true",
        hive_policy_name: policy.metadata.name ?? "",
        node_name: input.nodeName,
        path: trap.path,
      },
    },
    spec: {
      ...fileIdentity(input.file),
      "kernel-id": input.kernelId,
      accesses: [...(trap.accesses ?? ACCESS_KINDS)],
    },
  };
}

/** Two string maps (labels, annotations) with the same entries, `ignore`d keys aside. */
export function sameRecord(
  a: Record<string, string> | undefined,
  b: Record<string, string> | undefined,
  ignore: string[] = [],
): boolean {
  const ka = Object.keys(a ?? {}).filter((k) => !ignore.includes(k));
  const kb = Object.keys(b ?? {}).filter((k) => !ignore.includes(k));
  return ka.length === kb.length && ka.every((k) => a?.[k] === b?.[k]);
}

const ownerUids = (d: HiveData): string =>
  ((d.metadata.ownerReferences ?? []) as { uid?: string }[]).map((r) => r.uid ?? "").join(",");

/** True when `current` already says everything `desired` says (so no write is needed). */
export function dataUpToDate(current: HiveData, desired: HiveData): boolean {
  return (
    JSON.stringify(current.spec) === JSON.stringify(desired.spec) &&
    ownerUids(current) === ownerUids(desired) &&
    sameRecord(current.metadata.labels, desired.metadata.labels) &&
    sameRecord(current.metadata.annotations, desired.metadata.annotations, [ANNOTATION_RESOLVE_REQUEST])
  );
}
