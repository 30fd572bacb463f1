/**
 * What the alert builder needs to know about a watched file: the HiveData the loader holds
 * in its in-memory index (annotations, labels, spec) plus the few facts the HiveData does
 * not carry itself. Building an alert never calls the API server.
 */
import type { HiveData, HiveDataSpec } from "../../api/data.ts";
import { type DataAnnotations, LABEL_POLICY_NAMESPACE, LABEL_TRAP_ID } from "../../api/meta.ts";
import type { AllowEntry } from "../../api/policy.ts";

export interface AlertSource {
  /** The HiveData's annotations (api/meta.ts DATA_ANNOTATIONS); missing ones are left out of the alert. */
  annotations: Partial<DataAnnotations>;
  /** The HiveData's labels; `trap-id` (LABEL_TRAP_ID) names the trap. */
  labels: Readonly<Record<string, string>>;
  spec?: HiveDataSpec;
  /**
   * The trap's allow list (the HiveData's `spec.allow`; the trap's own in standalone mode): an
   * access matching one of its entries raises no alert (runtime/alerts/allowlist.ts).
   */
  allow?: readonly AllowEntry[];
  /** Namespace of the HivePolicy whose trap this is. */
  policyNamespace?: string;
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
 * An AlertSource from a HiveData object as the loader's index holds it. HiveData lives in
 * the monitor's namespace, so the policy namespace comes from the `hive-operator.com/policy-namespace`
 * label (or `context.policyNamespace`); the pod UID from its `pod_uid` annotation.
 */
export function alertSourceFromHiveData(
  data: Pick<HiveData, "metadata" | "spec">,
  context: { nodeName: string; kernelId?: string; policyNamespace?: string },
): AlertSource {
  const labels = data.metadata.labels ?? {};
  const source: AlertSource = {
    annotations: (data.metadata.annotations ?? {}) as Partial<DataAnnotations>,
    labels,
    spec: data.spec,
    nodeName: context.nodeName,
    kernelId: context.kernelId ?? data.spec["kernel-id"],
  };
  if (data.spec.allow !== undefined) source.allow = data.spec.allow;
  const policyNamespace = context.policyNamespace ?? labels[LABEL_POLICY_NAMESPACE];
  if (policyNamespace !== undefined) source.policyNamespace = policyNamespace;
  const podUid = data.metadata.annotations?.pod_uid;
  if (podUid) source.podUid = podUid;
  return source;
}
