/**
 * What the alert builder needs to know about a watched file: the HiveData the loader holds
 * in its in-memory index (which file, in which container) and the live trap it belongs to
 * (callback, allow list, policy), plus the few facts neither carries. Building an alert never
 * calls the API server.
 */
import { type HiveData, type HiveDataSpec, inodeOf, type PodFacts } from "../../api/data.ts";
import { type DataAnnotations, LABEL_TRAP_ID } from "../../api/meta.ts";
import { type AllowEntry, type Severity, trapDeny } from "../../api/policy.ts";
import type { LiveTrap } from "../controllers/live-traps.ts";
import type { FileKey } from "../kernel/contract.ts";
import type { AllowFiles } from "./allowlist.ts";

export interface AlertSource {
  /** The HiveData's annotations (api/meta.ts DATA_ANNOTATIONS); missing ones are left out of the alert. */
  annotations: Partial<DataAnnotations>;
  /** The HiveData's labels; `trap-id` (LABEL_TRAP_ID) names the trap. */
  labels: Readonly<Record<string, string>>;
  spec?: HiveDataSpec;
  /** The trap's callback (the live HivePolicy's; tenancy decides whether it is used, pipeline.ts). */
  callback?: string;
  /**
   * The trap's allow list (the live HivePolicy's): an access matching one of its entries raises
   * no alert (runtime/alerts/allowlist.ts).
   */
  allow?: readonly AllowEntry[];
  /**
   * The image's files at the exact paths the allow entries name, as discover found them in
   * this file's container (the HiveData's `executables`): an entry holds only for them.
   */
  allowFiles?: AllowFiles;
  /** A host path (standalone mode): the host's own files may run, not only an image layer's. */
  allowHost?: boolean;
  /** Namespace of the HivePolicy whose trap this is (the live policy's: tenancy depends on it). */
  policyNamespace?: string;
  /** The trap's severity (the live HivePolicy's); default warning. */
  severity?: Severity;
  /** The trap denies (or, dryRun, would): the alert says whether the kernel refused the access. */
  deny?: "deny" | "dryRun";
  /** The trap's labels (the live HivePolicy's), copied into the alert's `labels`. */
  trapLabels?: Readonly<Record<string, string>>;
  /** The monitor's cluster name (alert `cluster.name`). */
  clusterName?: string;
  /** Pod labels, owning workload and container image, as the discovering node found them (HiveData `spec.pod`). */
  pod?: PodFacts;
  /** Node the agent runs on (alert `node.name`); the `node_name` annotation wins when present. */
  nodeName: string;
  /** boot_id of the kernel that reported the access (alert `metadata.kernel_id`). */
  kernelId: string;
  /**
   * UID of the accessed pod, for the Kubernetes Event's involvedObject: `kubectl describe pod`
   * only lists Events whose involvedObject carries the pod's UID. Not part of the alert.
   */
  podUid?: string;
}

/** The trap id of a source: the `trap-id` label (falls back to "unknown" so an alert is never lost for it). */
export function trapIdOf(source: AlertSource): string {
  return source.labels[LABEL_TRAP_ID] ?? "unknown";
}

/**
 * An AlertSource from a HiveData object as the loader's index holds it and the live trap its
 * `trap-id` names (the loader's ArmedData). The HiveData gives the file's container and pod
 * (written by the agent that found them); the callback, allow list, policy name and namespace,
 * path and trap id are the trap's, whatever the HiveData's labels, annotations or spec say.
 */
export function alertSourceFromHiveData(
  data: Pick<HiveData, "metadata" | "spec">,
  live: LiveTrap,
  context: { nodeName: string; kernelId?: string; clusterName?: string },
): AlertSource {
  const { callback: _untrusted, ...annotations } = (data.metadata.annotations ?? {}) as Partial<
    DataAnnotations & { callback: string }
  >;
  const source: AlertSource = {
    annotations: { ...annotations, hive_policy_name: live.policy.name, path: live.trap.path },
    labels: { ...data.metadata.labels, [LABEL_TRAP_ID]: live.trapId },
    spec: data.spec,
    policyNamespace: live.policy.namespace,
    nodeName: context.nodeName,
    kernelId: context.kernelId ?? data.spec["kernel-id"],
  };
  if (live.trap.callback) source.callback = live.trap.callback;
  if (live.trap.severity) source.severity = live.trap.severity;
  const deny = trapDeny(live.trap);
  if (deny) source.deny = deny;
  if (live.trap.labels && Object.keys(live.trap.labels).length > 0) source.trapLabels = live.trap.labels;
  if (context.clusterName) source.clusterName = context.clusterName;
  if (data.spec.pod) source.pod = data.spec.pod;
  if (live.trap.allow !== undefined && live.trap.allow.length > 0) {
    source.allow = live.trap.allow;
    source.allowFiles = executablesOf(data.spec);
  }
  const podUid = data.metadata.annotations?.pod_uid;
  if (podUid) source.podUid = podUid;
  return source;
}

/** A HiveData's executables by path (a path may have several identities: an overlay's and a layer's). */
export function executablesOf(spec: Pick<HiveDataSpec, "executables">): AllowFiles {
  const files = new Map<string, FileKey[]>();
  for (const e of spec.executables ?? []) {
    const ino = inodeOf(e); // undefined beyond 64 bits: that entry names no file
    if (ino === undefined) continue;
    files.set(e.path, [...(files.get(e.path) ?? []), { ...e.device, ino }]);
  }
  return files;
}
