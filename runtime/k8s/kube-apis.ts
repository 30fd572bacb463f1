/**
 * The Kubernetes calls the agent makes, with client-node's names, parameters and model types, made
 * over kube-http.ts. client-node's own clients load undici and every generated API with their
 * configuration (about 20 MiB of an idle agent's memory: docs/operations.md); its model classes
 * and ObjectSerializer are kept, so bodies and answers convert (dates, micro-times) exactly as its
 * clients convert them. Each API is a table: method name → HTTP verb, path, model types.
 */
import type { AppsV1Api, CoordinationV1Api, CoreV1Api, CustomObjectsApi } from "@kubernetes/client-node";
import { ObjectSerializer } from "@kubernetes/client-node/dist/gen/models/ObjectSerializer.js";
import type { HttpMethod, KubeHttp } from "./kube-http.ts";

/** A call: verb, path with {param}s, the body's and the answer's model types ("any": as is). */
interface Call {
  method: HttpMethod;
  path: string;
  body?: string;
  answer: string;
  contentType?: string;
}

const JSON_PATCH = "application/json-patch+json";
/** Hive patches its own objects' metadata and fields: a merge patch (RFC 7386). */
const MERGE_PATCH = "application/merge-patch+json";

const get = (path: string, answer: string): Call => ({ method: "GET", path, answer });
const write = (method: HttpMethod, path: string, type: string): Call => ({
  method,
  path,
  body: type,
  answer: type,
});
const remove = (path: string, answer: string): Call => ({
  method: "DELETE",
  path,
  body: "V1DeleteOptions",
  answer,
});

const NS = "/api/v1/namespaces/{namespace}";
const CUSTOM = "/apis/{group}/{version}";
const CUSTOM_NS = `${CUSTOM}/namespaces/{namespace}/{plural}`;

const CORE = {
  readNode: get("/api/v1/nodes/{name}", "V1Node"),
  listNode: get("/api/v1/nodes", "V1NodeList"),
  listNamespace: get("/api/v1/namespaces", "V1NamespaceList"),
  listNamespacedPod: get(`${NS}/pods`, "V1PodList"),
  listPodForAllNamespaces: get("/api/v1/pods", "V1PodList"),
  listNamespacedEvent: get(`${NS}/events`, "CoreV1EventList"),
  listEventForAllNamespaces: get("/api/v1/events", "CoreV1EventList"),
  createNamespacedEvent: write("POST", `${NS}/events`, "CoreV1Event"),
  replaceNamespacedEvent: write("PUT", `${NS}/events/{name}`, "CoreV1Event"),
  patchNamespacedEvent: {
    ...write("PATCH", `${NS}/events/{name}`, "CoreV1Event"),
    body: "any",
    contentType: JSON_PATCH,
  },
  deleteNamespacedEvent: remove(`${NS}/events/{name}`, "V1Status"),
  readNamespacedSecret: get(`${NS}/secrets/{name}`, "V1Secret"),
  listNamespacedSecret: get(`${NS}/secrets`, "V1SecretList"),
  listSecretForAllNamespaces: get("/api/v1/secrets", "V1SecretList"),
  listNamespacedConfigMap: get(`${NS}/configmaps`, "V1ConfigMapList"),
  listConfigMapForAllNamespaces: get("/api/v1/configmaps", "V1ConfigMapList"),
} satisfies Partial<Record<keyof CoreV1Api, Call>>;

const CUSTOM_OBJECTS = {
  listClusterCustomObject: get(`${CUSTOM}/{plural}`, "any"),
  listNamespacedCustomObject: get(CUSTOM_NS, "any"),
  getNamespacedCustomObject: get(`${CUSTOM_NS}/{name}`, "any"),
  createNamespacedCustomObject: write("POST", CUSTOM_NS, "any"),
  replaceNamespacedCustomObject: write("PUT", `${CUSTOM_NS}/{name}`, "any"),
  replaceNamespacedCustomObjectStatus: write("PUT", `${CUSTOM_NS}/{name}/status`, "any"),
  patchNamespacedCustomObject: { ...write("PATCH", `${CUSTOM_NS}/{name}`, "any"), contentType: MERGE_PATCH },
  deleteNamespacedCustomObject: remove(`${CUSTOM_NS}/{name}`, "any"),
} satisfies Partial<Record<keyof CustomObjectsApi, Call>>;

const LEASES = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases";
const COORDINATION = {
  readNamespacedLease: get(`${LEASES}/{name}`, "V1Lease"),
  createNamespacedLease: write("POST", LEASES, "V1Lease"),
  replaceNamespacedLease: write("PUT", `${LEASES}/{name}`, "V1Lease"),
} satisfies Partial<Record<keyof CoordinationV1Api, Call>>;

const APPS = {
  readNamespacedDaemonSet: get("/apis/apps/v1/namespaces/{namespace}/daemonsets/{name}", "V1DaemonSet"),
} satisfies Partial<Record<keyof AppsV1Api, Call>>;

/**
 * The agent's APIs: client-node's signatures, so its clients fit wherever these are taken.
 * A patch of a custom object is a merge patch, of an Event a JSON patch; options are not read.
 */
export type CoreApi = Pick<CoreV1Api, keyof typeof CORE>;
export type CustomApi = Pick<CustomObjectsApi, keyof typeof CUSTOM_OBJECTS>;
export type CoordinationApi = Pick<CoordinationV1Api, keyof typeof COORDINATION>;
export type AppsApi = Pick<AppsV1Api, keyof typeof APPS>;

export const coreApi = (http: KubeHttp) => api<CoreApi>(http, CORE);
export const customApi = (http: KubeHttp) => api<CustomApi>(http, CUSTOM_OBJECTS);
export const coordinationApi = (http: KubeHttp) => api<CoordinationApi>(http, COORDINATION);
export const appsApi = (http: KubeHttp) => api<AppsApi>(http, APPS);

type Params = Record<string, unknown>;

/** One function per table entry; the table's keys are the API's methods (checked above). */
function api<T>(http: KubeHttp, calls: { [K in keyof T]: Call }): T {
  const methods = Object.entries<Call>(calls).map(([name, call]) => [
    name,
    (params: Params = {}) => send(http, call, params),
  ]);
  return Object.fromEntries(methods) as T;
}

async function send(http: KubeHttp, call: Call, params: Params): Promise<unknown> {
  const used = new Set<string>(["body"]);
  const path = call.path.replace(/\{(\w+)\}/g, (_, key: string) => {
    used.add(key);
    const value = params[key];
    if (value === undefined || value === null || value === "")
      throw new Error(`${call.method} ${call.path}: the required parameter "${key}" is missing`);
    return encodeURIComponent(String(value));
  });
  const query: Params = {};
  for (const [key, value] of Object.entries(params)) {
    // client-node names the `continue` parameter `_continue` (a reserved word in its generator).
    if (!used.has(key)) query[key === "_continue" ? "continue" : key] = value;
  }
  const body =
    params.body === undefined || call.body === undefined
      ? undefined
      : ObjectSerializer.serialize(params.body, call.body, "");
  const answer = await http.request(call.method, path, {
    query,
    ...(body !== undefined ? { body } : {}),
    ...(call.contentType ? { contentType: call.contentType } : {}),
  });
  return ObjectSerializer.deserialize(answer, call.answer, "");
}
