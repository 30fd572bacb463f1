/**
 * The controllers' ports (ports.ts) over the agent's Kubernetes client (k8s/kube-apis.ts; a patch of
 * a custom object is a merge patch). Per-node trap errors are
 * Kubernetes Events on the HivePolicy, one per node × trap × container × reason with a
 * deterministic name: each node writes only its own, so nodes never conflict, and the
 * single status writer (the pods role) aggregates them (as Kyverno aggregates ephemeral
 * reports into one).
 */
import { createHash } from "node:crypto";
import type { CoreV1Event } from "@kubernetes/client-node";
import type { HiveData } from "../../api/data.ts";
import {
  API_VERSION,
  GROUP,
  KIND_POLICY,
  LABEL_MANAGED_BY,
  LABEL_NODE,
  LABEL_POLICY,
  LABEL_TRAP_ID,
  MANAGED_BY,
  PLURAL_DATA,
  PLURAL_POLICY,
  VERSION,
} from "../../api/meta.ts";
import type { HivePolicy } from "../../api/policy.ts";
import { apiError, isAlreadyExists, isNotFound } from "../k8s/api-errors.ts";
import type { CoreApi, CustomApi } from "../k8s/kube-apis.ts";
import { displaySafe } from "../text.ts";
import {
  type DataWriter,
  type NodeTrapError,
  type PolicyWriter,
  TRAP_ERROR_MESSAGE_MAX,
  type TrapErrorReporter,
} from "./ports.ts";

/** Annotation on a trap-error Event carrying the structured report (the aggregator reads it). */
export const ANNOTATION_TRAP_ERROR = `${GROUP}/trap-error`;

export function createDataWriter(custom: CustomApi): DataWriter {
  const at = (namespace: string) => ({ group: GROUP, version: VERSION, namespace, plural: PLURAL_DATA });
  return {
    async create(data) {
      const ns = data.metadata.namespace ?? "default";
      try {
        return (await custom.createNamespacedCustomObject({ ...at(ns), body: data })) as HiveData;
      } catch (error) {
        if (isAlreadyExists(error)) {
          // Written earlier (a restart, another pass): replace it with what we know now.
          const current = (await custom.getNamespacedCustomObject({
            ...at(ns),
            name: data.metadata.name ?? "",
          })) as HiveData;
          const body = {
            ...data,
            metadata: { ...data.metadata, resourceVersion: current.metadata.resourceVersion },
          };
          return (await custom.replaceNamespacedCustomObject({
            ...at(ns),
            name: data.metadata.name ?? "",
            body,
          })) as HiveData;
        }
        throw apiError("create HiveData", `${ns}/${data.metadata.name}`, error);
      }
    },
    async replace(data) {
      const ns = data.metadata.namespace ?? "default";
      try {
        return (await custom.replaceNamespacedCustomObject({
          ...at(ns),
          name: data.metadata.name ?? "",
          body: data,
        })) as HiveData;
      } catch (error) {
        throw apiError("replace HiveData", `${ns}/${data.metadata.name}`, error);
      }
    },
    async remove(namespace, name) {
      try {
        await custom.deleteNamespacedCustomObject({ ...at(namespace), name });
      } catch (error) {
        if (!isNotFound(error)) throw apiError("delete HiveData", `${namespace}/${name}`, error);
      }
    },
    async annotate(namespace, name, annotations) {
      try {
        await custom.patchNamespacedCustomObject({
          ...at(namespace),
          name,
          body: { metadata: { annotations } },
        });
      } catch (error) {
        if (!isNotFound(error)) throw apiError("annotate HiveData", `${namespace}/${name}`, error);
      }
    },
  };
}

export function createPolicyWriter(custom: CustomApi): PolicyWriter {
  const at = (p: HivePolicy) => ({
    group: GROUP,
    version: VERSION,
    namespace: p.metadata.namespace ?? "default",
    plural: PLURAL_POLICY,
    name: p.metadata.name ?? "",
  });
  return {
    async writeStatus(policy, status) {
      try {
        await custom.replaceNamespacedCustomObjectStatus({ ...at(policy), body: { ...policy, status } });
      } catch (error) {
        throw apiError(
          "write HivePolicy status",
          `${policy.metadata.namespace}/${policy.metadata.name}`,
          error,
        );
      }
    },
    async setFinalizers(policy, finalizers) {
      try {
        const body = { metadata: { finalizers, resourceVersion: policy.metadata.resourceVersion } };
        await custom.patchNamespacedCustomObject({ ...at(policy), body });
      } catch (error) {
        if (!isNotFound(error))
          throw apiError(
            "set HivePolicy finalizers",
            `${policy.metadata.namespace}/${policy.metadata.name}`,
            error,
          );
      }
    },
  };
}

export function trapErrorEventName(e: NodeTrapError): string {
  const h = createHash("sha256")
    .update([e.node, e.trapId, e.pod ?? "", e.container ?? "", e.reason].join("\n"))
    .digest("hex")
    .slice(0, 16);
  return `${e.policyName.slice(0, 200)}.hive-${h}`;
}

/** Reads the report back from an Event (the aggregator's side). */
export function trapErrorFromEvent(event: CoreV1Event): NodeTrapError | undefined {
  const text = event.metadata?.annotations?.[ANNOTATION_TRAP_ERROR];
  if (!text) return undefined;
  try {
    return JSON.parse(text) as NodeTrapError;
  } catch {
    return undefined; // not ours or damaged: ignored, the node rewrites it on its next pass
  }
}

export function createTrapErrorReporter(
  core: CoreApi,
  nodeName: string,
  component = "hive-agent",
): TrapErrorReporter {
  /** name → namespace/message last written, so unchanged reports cost no request. */
  let written: Map<string, { namespace: string; text: string }> | undefined;

  async function load(): Promise<Map<string, { namespace: string; text: string }>> {
    const map = new Map<string, { namespace: string; text: string }>();
    const labelSelector = `${LABEL_MANAGED_BY}=${MANAGED_BY},${LABEL_NODE}=${nodeName}`;
    let _continue: string | undefined;
    do {
      // The first page from the watch cache (resourceVersion=0), as the informers list: every node
      // does this at start, and a consistent read would scan the cluster's Events in etcd each time.
      // A report the cache misses is created again (AlreadyExists → replaced); one it still shows
      // after a deletion is written again when its text changes.
      const page = await core.listEventForAllNamespaces({
        labelSelector,
        limit: 500,
        ...(_continue ? { _continue } : { resourceVersion: "0" }),
      });
      for (const ev of page.items) {
        map.set(ev.metadata?.name ?? "", {
          namespace: ev.metadata?.namespace ?? "",
          text: ev.metadata?.annotations?.[ANNOTATION_TRAP_ERROR] ?? "",
        });
      }
      _continue = page.metadata?._continue || undefined;
    } while (_continue);
    return map;
  }

  return {
    async sync(errors) {
      written ??= await load();
      const now = new Date();
      const want = new Map<string, NodeTrapError>();
      for (const e of errors) want.set(trapErrorEventName(e), e);
      for (const [name, e] of want) {
        const text = JSON.stringify(e);
        if (written.get(name)?.text === text) continue;
        const body: CoreV1Event = {
          metadata: {
            name,
            namespace: e.policyNamespace,
            labels: {
              [LABEL_MANAGED_BY]: MANAGED_BY,
              [LABEL_NODE]: nodeName,
              [LABEL_POLICY]: e.policyName,
              [LABEL_TRAP_ID]: e.trapId,
            },
            annotations: { [ANNOTATION_TRAP_ERROR]: text },
          },
          involvedObject: {
            apiVersion: API_VERSION,
            kind: KIND_POLICY,
            name: e.policyName,
            namespace: e.policyNamespace,
            ...(e.policyUid ? { uid: e.policyUid } : {}),
          },
          reason: e.reason,
          message: displaySafe(
            [e.pod && `pod ${e.pod}`, e.container && `container ${e.container}`, e.message]
              .filter(Boolean)
              .join(": "),
            TRAP_ERROR_MESSAGE_MAX + 320,
          ),
          type: "Warning",
          source: { component, host: nodeName },
          reportingComponent: `${GROUP}/agent`,
          reportingInstance: nodeName,
          firstTimestamp: now,
          lastTimestamp: now,
          count: 1,
        };
        try {
          await core.createNamespacedEvent({ namespace: e.policyNamespace, body });
        } catch (error) {
          if (!isAlreadyExists(error))
            throw apiError("create trap error Event", `${e.policyNamespace}/${name}`, error);
          await core.replaceNamespacedEvent({ namespace: e.policyNamespace, name, body });
        }
        written.set(name, { namespace: e.policyNamespace, text });
      }
      for (const [name, { namespace }] of [...written]) {
        if (want.has(name)) continue;
        try {
          await core.deleteNamespacedEvent({ namespace, name });
        } catch (error) {
          if (!isNotFound(error)) throw apiError("delete trap error Event", `${namespace}/${name}`, error);
        }
        written.delete(name);
      }
    },
  };
}
