/**
 * What the alert builder needs to know about a watched file: the HiveData the loader holds
 * in its in-memory index (annotations, labels, spec) plus the few facts the HiveData does
 * not carry itself. Building an alert never calls the API server.
 */
import type { HiveData, HiveDataSpec } from "../../api/data.ts";
import { type DataAnnotations, LABEL_TRAP_ID } from "../../api/meta.ts";

export interface AlertSource {
  /** The HiveData's annotations (api/meta.ts DATA_ANNOTATIONS); missing ones are left out of the alert. */
  annotations: Partial<DataAnnotations>;
  /** The HiveData's labels; `trap-id` (LABEL_TRAP_ID) names the trap. */
  labels: Readonly<Record<string, string>>;
  spec?: HiveDataSpec;
  /** Namespace of the HivePolicy whose trap this is. */
  policyNamespace?: string;
  /** Node the agent runs on (alert `node.name`); the `node_name` annotation wins when present. */
  nodeName: string;
  /** boot_id of the kernel that reported the access (alert `metadata.kernel_id`). */
  kernelId: string;
}

/** The trap id of a source: the `trap-id` label (falls back to "unknown" so an alert is never lost for it). */
export function trapIdOf(source: AlertSource): string {
  return source.labels[LABEL_TRAP_ID] ?? "unknown";
}

/**
 * An AlertSource from a HiveData object as the loader's index holds it. The policy
 * namespace is `context.policyNamespace` when given, else the HiveData's own namespace
 * (HiveData lives beside its HivePolicy).
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
  const policyNamespace = context.policyNamespace ?? data.metadata.namespace;
  if (policyNamespace !== undefined) source.policyNamespace = policyNamespace;
  return source;
}
