import { hiveCrds, policyReportCrd } from "../../api/index.ts";
import type { KubernetesObject } from "./objects.ts";

/**
 * HivePolicy and HiveData CRDs, exactly as api/crd.ts derives them from the one schema; with
 * `policyReports`, the PolicyReport CRD too (for clusters that have none).
 */
export function crdManifests(policyReports = false): KubernetesObject[] {
  const hive: KubernetesObject[] = hiveCrds().map((crd) => ({
    ...crd,
    metadata: { ...crd.metadata, labels: { ...crd.metadata.labels, "app.kubernetes.io/name": "hive" } },
  }));
  return policyReports ? [...hive, { ...policyReportCrd() }] : hive;
}
