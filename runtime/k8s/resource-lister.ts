/**
 * Which collection an informer reads, and how: its URL path (for WATCH), its LIST call and the
 * decoder that turns a watch object into the same model the LIST returns.
 */
import type { KubernetesObject } from "@kubernetes/client-node";
import { ObjectSerializer } from "@kubernetes/client-node/dist/gen/models/ObjectSerializer.js";
import type { CoreApi, CustomApi } from "./kube-apis.ts";

/** Which collection to watch: group "" is the core API. Without namespace: all namespaces. */
export interface ResourceRef {
  group: string;
  version: string;
  plural: string;
  namespace?: string;
}

export interface ListParams {
  /** "0": any version (the watch cache); a version: not older than it; absent: a consistent read. */
  resourceVersion?: string;
  limit?: number;
  continueToken?: string;
  labelSelector?: string;
  fieldSelector?: string;
}

export interface ListPage<T> {
  items: T[];
  metadata?: { resourceVersion?: string; continue?: string; _continue?: string };
}

export type ListFn<T> = (params: ListParams) => Promise<ListPage<T>>;

const CORE_MODELS: Record<string, { type: string; kind: string }> = {
  pods: { type: "V1Pod", kind: "Pod" },
  namespaces: { type: "V1Namespace", kind: "Namespace" },
  nodes: { type: "V1Node", kind: "Node" },
  events: { type: "CoreV1Event", kind: "Event" },
  secrets: { type: "V1Secret", kind: "Secret" },
  configmaps: { type: "V1ConfigMap", kind: "ConfigMap" },
};

export function collectionPath(ref: ResourceRef): string {
  const base = ref.group === "" ? `/api/${ref.version}` : `/apis/${ref.group}/${ref.version}`;
  return ref.namespace ? `${base}/namespaces/${ref.namespace}/${ref.plural}` : `${base}/${ref.plural}`;
}

/** The list call and watch-object decoder for a resource. */
export function resourceLister<T>(
  clients: { core: CoreApi; custom: CustomApi },
  ref: ResourceRef,
): { list: ListFn<T>; decode: (raw: unknown) => T } {
  if (ref.group !== "") return { list: customLister<T>(clients.custom, ref), decode: (raw) => raw as T };
  const model = CORE_MODELS[ref.plural];
  if (!model) throw new Error(`no core list call for "${ref.plural}"; pass options.list`);
  const core = clients.core;
  const list: ListFn<T> = async (p) => {
    const page = await listCorePage(core, ref, listQuery(p));
    // kube-apiserver leaves kind/apiVersion off list items; watch objects carry them. Make them agree.
    for (const item of page.items as KubernetesObject[]) {
      item.kind ??= model.kind;
      item.apiVersion ??= ref.version;
    }
    return page as ListPage<T>;
  };
  // Watch hands over raw JSON; decode it into the same model classes the typed list returns.
  const decode = (raw: unknown) => ObjectSerializer.deserialize(raw, model.type, "") as T;
  return { list, decode };
}

/** ListParams as client-node's list calls name them; unset ones are left out of the request. */
interface ListQuery {
  resourceVersion?: string;
  limit?: number;
  _continue?: string;
  labelSelector?: string;
  fieldSelector?: string;
}

function listQuery(p: ListParams): ListQuery {
  return {
    ...(p.resourceVersion !== undefined ? { resourceVersion: p.resourceVersion } : {}),
    ...(p.limit ? { limit: p.limit } : {}),
    ...(p.continueToken ? { _continue: p.continueToken } : {}),
    ...(p.labelSelector ? { labelSelector: p.labelSelector } : {}),
    ...(p.fieldSelector ? { fieldSelector: p.fieldSelector } : {}),
  };
}

function customLister<T>(custom: CustomApi, ref: ResourceRef): ListFn<T> {
  return (p) => {
    const q = { group: ref.group, version: ref.version, plural: ref.plural, ...listQuery(p) };
    return ref.namespace
      ? custom.listNamespacedCustomObject({ ...q, namespace: ref.namespace })
      : custom.listClusterCustomObject(q);
  };
}

type CorePage = { items: unknown[]; metadata?: { resourceVersion?: string; _continue?: string } };

/** One page from the typed core call for `ref.plural` (one of CORE_MODELS). */
async function listCorePage(core: CoreApi, ref: ResourceRef, q: ListQuery): Promise<CorePage> {
  const ns = ref.namespace;
  switch (ref.plural) {
    case "pods":
      return ns
        ? await core.listNamespacedPod({ ...q, namespace: ns })
        : await core.listPodForAllNamespaces(q);
    case "namespaces":
      return await core.listNamespace(q);
    case "nodes":
      return await core.listNode(q);
    case "events":
      return ns
        ? await core.listNamespacedEvent({ ...q, namespace: ns })
        : await core.listEventForAllNamespaces(q);
    case "secrets":
      return ns
        ? await core.listNamespacedSecret({ ...q, namespace: ns })
        : await core.listSecretForAllNamespaces(q);
    default:
      return ns
        ? await core.listNamespacedConfigMap({ ...q, namespace: ns })
        : await core.listConfigMapForAllNamespaces(q);
  }
}
