/** The report writer's API calls on the API server (CustomObjectsApi, `wgpolicyk8s.io/v1alpha2`). */
import type { CustomObjectsApi } from "@kubernetes/client-node";
import { PLURAL_REPORT, REPORT_GROUP, REPORT_NAME, REPORT_VERSION } from "../../api/report.ts";
import { isNotFound } from "../k8s/api-errors.ts";
import type { ReportClient } from "./report-writer.ts";

export const REPORTS = { group: REPORT_GROUP, version: REPORT_VERSION, plural: PLURAL_REPORT };

export function createReportClient(custom: CustomObjectsApi): ReportClient {
  return {
    async create(report) {
      await custom.createNamespacedCustomObject({
        ...REPORTS,
        namespace: report.metadata.namespace,
        body: report,
      });
    },
    async replace(report, resourceVersion) {
      await custom.replaceNamespacedCustomObject({
        ...REPORTS,
        namespace: report.metadata.namespace,
        name: REPORT_NAME,
        body: { ...report, metadata: { ...report.metadata, resourceVersion } },
      });
    },
    async remove(namespace) {
      await custom
        .deleteNamespacedCustomObject({ ...REPORTS, namespace, name: REPORT_NAME })
        .catch((error) => {
          if (!isNotFound(error)) throw error;
        });
    },
  };
}

/** Whether the API server serves PolicyReports (their CRD is installed). */
export async function reportsServed(custom: CustomObjectsApi): Promise<boolean> {
  try {
    await custom.listClusterCustomObject({ ...REPORTS, limit: 1 });
    return true;
  } catch (error) {
    if (isNotFound(error)) return false;
    throw error;
  }
}
