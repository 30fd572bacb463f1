import type { Plain, PodMonitorArgs } from "../args.ts";
import { AGENT_SELECTOR } from "./daemonset.ts";
import { hiveLabels, type KubernetesObject } from "./objects.ts";

/**
 * A Prometheus Operator PodMonitor for the agents' `metrics` port (the container port of that
 * name, so a changed `metricsPort` needs no change here). Only when asked: the kind exists only
 * where the Prometheus Operator's CRDs are installed.
 */
export function podMonitorManifest(namespace: string, settings: Plain<PodMonitorArgs>): KubernetesObject {
  return {
    apiVersion: "monitoring.coreos.com/v1",
    kind: "PodMonitor",
    metadata: { name: "hive-agent", namespace, labels: { ...settings.labels, ...hiveLabels("agent") } },
    spec: {
      selector: { matchLabels: AGENT_SELECTOR },
      namespaceSelector: { matchNames: [namespace] },
      podMetricsEndpoints: [
        { port: "metrics", path: "/metrics", ...(settings.interval ? { interval: settings.interval } : {}) },
      ],
    },
  };
}
