/**
 * Informers (runtime/k8s) feeding the controllers' `on*` methods. One place that knows
 * which resource each controller watches and with which selectors: discover watches only
 * its node's pods (field selector) and HiveData (label selector); a loader only its
 * kernel's HiveData. No feed watches every pod of the cluster: its cache would grow with the
 * cluster's size (the pods of a node are its own discover's concern; the pods role watches only
 * the pods of nodes without a ready agent, coverage-feeds.ts).
 */
import type { CoreV1Event, KubernetesObject, V1Pod } from "@kubernetes/client-node";
import type { HiveData } from "../../api/data.ts";
import {
  GROUP,
  LABEL_KERNEL_ID,
  LABEL_MANAGED_BY,
  LABEL_NODE,
  LABEL_TRAP_ID,
  MANAGED_BY,
  PLURAL_DATA,
  PLURAL_POLICY,
  VERSION,
} from "../../api/meta.ts";
import type { HivePolicy } from "../../api/policy.ts";
import { type PolicyReport, REPORT_NAME, type ReportFormat } from "../../api/report.ts";
import { createInformer, type Informer, type InformerOptions, type ResourceRef } from "../k8s/informer.ts";
import type { KubeClients } from "../k8s/kube-client.ts";
import type { Logger } from "../log.ts";
import { reportResource } from "../reports/kube-report-client.ts";
import type { WatchEventType } from "./ports.ts";

export const POLICIES: ResourceRef = { group: GROUP, version: VERSION, plural: PLURAL_POLICY };
export const HIVE_DATA: ResourceRef = { group: GROUP, version: VERSION, plural: PLURAL_DATA };
export const PODS: ResourceRef = { group: "", version: "v1", plural: "pods" };
export const EVENTS: ResourceRef = { group: "", version: "v1", plural: "events" };

export type Sink<T> = (type: WatchEventType, obj: T) => void;

export interface FeedOptions {
  clients: KubeClients;
  log: Logger;
  pageSize?: number;
  watchTimeoutSeconds?: number;
}

export function feed<T extends KubernetesObject>(
  resource: ResourceRef,
  sink: Sink<T>,
  options: FeedOptions & {
    labelSelector?: string;
    fieldSelector?: string;
    /** Keeps only the fields the controller reads (InformerOptions.transform). */
    transform?: (obj: T) => T;
  },
): Informer<T> {
  const informerOptions: InformerOptions<T> = {
    resource,
    clients: options.clients,
    logger: options.log,
    handlers: {
      add: (o) => sink("ADDED", o),
      update: (o) => sink("MODIFIED", o),
      delete: (o) => sink("DELETED", o),
    },
  };
  if (options.labelSelector) informerOptions.labelSelector = options.labelSelector;
  if (options.fieldSelector) informerOptions.fieldSelector = options.fieldSelector;
  if (options.transform) informerOptions.transform = options.transform;
  if (options.pageSize) informerOptions.pageSize = options.pageSize;
  if (options.watchTimeoutSeconds) informerOptions.watchTimeoutSeconds = options.watchTimeoutSeconds;
  return createInformer<T>(informerOptions);
}

export const policyFeed = (sink: Sink<HivePolicy>, o: FeedOptions) =>
  feed<HivePolicy & KubernetesObject>(POLICIES, sink as Sink<HivePolicy & KubernetesObject>, o);

/**
 * Only this node's pods: a DaemonSet must never watch every pod of the cluster. Discover makes the
 * HiveData of these pods and removes it when one finishes or is deleted.
 */
export const nodePodFeed = (nodeName: string, sink: Sink<V1Pod>, o: FeedOptions) =>
  feed<V1Pod>(PODS, sink, { ...o, fieldSelector: `spec.nodeName=${nodeName}` });

/** HiveData lives in the monitor's namespace only (where the agent's Role reaches). */
const dataIn = (namespace: string): ResourceRef => ({ ...HIVE_DATA, namespace });

export const nodeDataFeed = (namespace: string, nodeName: string, sink: Sink<HiveData>, o: FeedOptions) =>
  feed<HiveData & KubernetesObject>(dataIn(namespace), sink as Sink<HiveData & KubernetesObject>, {
    ...o,
    labelSelector: `${LABEL_NODE}=${nodeName}`,
  });

export const kernelDataFeed = (namespace: string, kernelId: string, sink: Sink<HiveData>, o: FeedOptions) =>
  feed<HiveData & KubernetesObject>(dataIn(namespace), sink as Sink<HiveData & KubernetesObject>, {
    ...o,
    labelSelector: `${LABEL_KERNEL_ID}=${kernelId}`,
  });

export const allDataFeed = (namespace: string, sink: Sink<HiveData>, o: FeedOptions) =>
  feed<HiveData & KubernetesObject>(dataIn(namespace), sink as Sink<HiveData & KubernetesObject>, {
    ...o,
    labelSelector: `${LABEL_MANAGED_BY}=${MANAGED_BY}`,
  });

/**
 * The nodes' trap-error reports: Hive's Events that carry a node label. The alert Events on
 * accessed pods (runtime/alerts/pod-events.ts) are Hive's too but have no node label, so the
 * pod controller's cache never fills with them.
 */
export const trapErrorFeed = (sink: Sink<CoreV1Event>, o: FeedOptions) =>
  feed<CoreV1Event>(EVENTS, sink, { ...o, labelSelector: `${LABEL_MANAGED_BY}=${MANAGED_BY},${LABEL_NODE}` });

/**
 * The agents' access Events on pods (a trap label, no node label), for the PolicyReports. Kept to
 * what the fold reads: never the message, so the cache holds a few hundred bytes per pod × trap.
 */
export const accessEventFeed = (sink: Sink<CoreV1Event>, o: FeedOptions) =>
  feed<CoreV1Event>(EVENTS, sink, {
    ...o,
    labelSelector: `${LABEL_MANAGED_BY}=${MANAGED_BY},${LABEL_TRAP_ID},!${LABEL_NODE}`,
    transform: (ev) => ({
      metadata: {
        name: ev.metadata?.name,
        namespace: ev.metadata?.namespace,
        resourceVersion: ev.metadata?.resourceVersion,
        labels: ev.metadata?.labels,
        annotations: ev.metadata?.annotations,
      },
      involvedObject: ev.involvedObject,
      // The node that wrote it (admission: its own), checked against the pod's (access-origin.ts).
      reportingInstance: ev.reportingInstance,
      count: ev.count,
      lastTimestamp: ev.lastTimestamp,
      firstTimestamp: ev.firstTimestamp,
    }),
  });

/** Hive's reports of `format` (one per namespace, by name: admission keeps the name Hive's). */
export const reportFeed = (format: ReportFormat, sink: Sink<PolicyReport>, o: FeedOptions) =>
  feed<PolicyReport & KubernetesObject>(
    reportResource(format),
    sink as Sink<PolicyReport & KubernetesObject>,
    {
      ...o,
      fieldSelector: `metadata.name=${REPORT_NAME}`,
    },
  );
