import { hiveCrds } from "../../api/index.ts";
import type { KubernetesObject } from "./objects.ts";

/** HivePolicy and HiveData CRDs, exactly as api/crd.ts derives them from the one schema. */
export function crdManifests(): KubernetesObject[] {
  return hiveCrds().map((crd) => ({
    ...crd,
    metadata: { ...crd.metadata, labels: { ...crd.metadata.labels, "app.kubernetes.io/name": "hive" } },
  }));
}
