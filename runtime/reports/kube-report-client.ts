/** The report writer's API calls on the API server (CustomApi, the format's group). */

import { REPORT_FORMATS, REPORT_NAME, type ReportFormat } from "../../api/report.ts";
import { isNotFound } from "../k8s/api-errors.ts";
import type { ResourceRef } from "../k8s/informer.ts";
import type { CustomApi } from "../k8s/kube-apis.ts";
import type { ReportClient } from "./report-writer.ts";

/** The reports of `format` as the custom objects API and the informers address them. */
export const reportResource = (format: ReportFormat): ResourceRef => {
  const { group, version, plural } = REPORT_FORMATS[format];
  return { group, version, plural };
};

export function createReportClient(custom: CustomApi, format: ReportFormat): ReportClient {
  const REPORTS = reportResource(format);
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

/** Whether the API server serves reports of `format` (their CRD is installed). */
export async function reportsServed(custom: CustomApi, format: ReportFormat): Promise<boolean> {
  try {
    await custom.listClusterCustomObject({ ...reportResource(format), limit: 1 });
    return true;
  } catch (error) {
    if (isNotFound(error)) return false;
    throw error;
  }
}
