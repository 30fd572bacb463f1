import { hiveCrds, policyReportCrd } from "../../api/index.ts";
import type { ReportFormat } from "../../api/report.ts";
import type { KubernetesObject } from "./objects.ts";

/**
 * HivePolicy and HiveData CRDs, exactly as api/crd.ts derives them from the one schema; with a
 * report format, that report's CRD too (for clusters that have none).
 */
export function crdManifests(reports?: ReportFormat): KubernetesObject[] {
  const hive: KubernetesObject[] = hiveCrds().map((crd) => ({
    ...crd,
    metadata: { ...crd.metadata, labels: { ...crd.metadata.labels, "app.kubernetes.io/name": "hive" } },
  }));
  return reports ? [...hive, { ...policyReportCrd(reports) }] : hive;
}
