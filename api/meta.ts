/**
 * Names shared by every part of Hive: the API group, kinds, and the labels and annotations
 * that tie HiveData to the trap, container and kernel it describes. One place, so the
 * component, the agent and the CLI can never disagree on a spelling.
 */
import { type Static, Type } from "@sinclair/typebox";

export const GROUP = "hive-operator.com";
export const VERSION = "v1alpha1";
export const API_VERSION = `${GROUP}/${VERSION}` as const;

export const KIND_POLICY = "HivePolicy";
export const KIND_DATA = "HiveData";
export const PLURAL_POLICY = "hivepolicies";
export const PLURAL_DATA = "hivedata";

/** The finalizer the reference design puts on every HivePolicy. */
export const POLICY_FINALIZER = `${GROUP}/finalizer`;

/** Labels on HiveData. `trap-id` is spelled as in the reference design (a compatibility contract). */
export const LABEL_TRAP_ID = "trap-id";
export const LABEL_KERNEL_ID = `${GROUP}/kernel-id`;
export const LABEL_NODE = `${GROUP}/node`;
export const LABEL_POLICY = `${GROUP}/policy`;
/** Namespace of the HivePolicy: HiveData lives in the monitor's namespace, whatever the policy's. */
export const LABEL_POLICY_NAMESPACE = `${GROUP}/policy-namespace`;
export const LABEL_MANAGED_BY = "app.kubernetes.io/managed-by";

/**
 * Annotation a kernel's loader sets (a timestamp) on a HiveData when the kernel reported a
 * change in the trapped file's directory; the owning node's discover re-resolves. On a kernel
 * shared by several nodes the loader sets it on other nodes' HiveData: the admission policy
 * allows an agent exactly that change on HiveData it does not own.
 */
export const ANNOTATION_RESOLVE_REQUEST = `${GROUP}/resolve-requested`;
export const MANAGED_BY = "hive";

/**
 * The labels selecting the agent's pods (the DaemonSet's selector, immutable once applied): the
 * pods role reads these pods' Ready condition to learn which nodes run a ready agent.
 */
export const AGENT_SELECTOR = { "app.kubernetes.io/name": "hive", "app.kubernetes.io/component": "agent" };

/**
 * Annotations on HiveData, as in the reference design but for `callback`: the alert is enriched
 * from them without an API call per event. Where alerts go is the live HivePolicy's trap's
 * callback, never a HiveData's (others than the platform team may write HiveData).
 */
export const DATA_ANNOTATIONS = [
  "container_id",
  "container_name",
  "hive_policy_name",
  "namespace",
  "node_name",
  "path",
  "pod_ip",
  "pod_name",
  "pod_uid",
] as const;
export type DataAnnotation = (typeof DATA_ANNOTATIONS)[number];
export type DataAnnotations = Record<DataAnnotation, string>;

/** Access kinds a trap can ask for; the kernel program keeps only the wanted ones. */
export const ACCESS_KINDS = ["read", "write", "exec", "append", "open"] as const;
export type AccessKind = (typeof ACCESS_KINDS)[number];
export const AccessKindSchema = Type.Union(
  ACCESS_KINDS.map((kind) => Type.Literal(kind)),
  {
    description: "An access kind: read, write, exec, append or open.",
    errorMessage: `must be one of ${ACCESS_KINDS.join(", ")}`,
  },
);

/**
 * The workload a pod belongs to: its controller owner, followed up to the Deployment for a
 * ReplicaSet that the Deployment controller made (told by the pod's `pod-template-hash` label and
 * the ReplicaSet's name, not by reading the ReplicaSet: the agent may not read ReplicaSets).
 */
export const WorkloadSchema = Type.Object(
  {
    kind: Type.String({
      maxLength: 63,
      description: "Kind of the owner, e.g. Deployment, StatefulSet, DaemonSet, Job.",
    }),
    name: Type.String({ maxLength: 253, description: "Name of the owner, in the pod's namespace." }),
  },
  { additionalProperties: false, description: "The workload that owns the pod." },
);
export type Workload = Static<typeof WorkloadSchema>;

/** A Kubernetes condition (metav1.Condition). */
export const ConditionSchema = Type.Object({
  type: Type.String({ minLength: 1, maxLength: 316 }),
  status: Type.Union([Type.Literal("True"), Type.Literal("False"), Type.Literal("Unknown")]),
  observedGeneration: Type.Optional(Type.Integer({ minimum: 0 })),
  lastTransitionTime: Type.String({ format: "date-time" }),
  reason: Type.String({ minLength: 1, maxLength: 1024, pattern: "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$" }),
  message: Type.String({ maxLength: 32768 }),
});
export type Condition = Static<typeof ConditionSchema>;

/** The metadata fields Hive reads or writes on its objects. */
export const ObjectMetaSchema = Type.Object(
  {
    name: Type.Optional(Type.String()),
    namespace: Type.Optional(Type.String()),
    uid: Type.Optional(Type.String()),
    generation: Type.Optional(Type.Integer()),
    resourceVersion: Type.Optional(Type.String()),
    creationTimestamp: Type.Optional(Type.String()),
    deletionTimestamp: Type.Optional(Type.String()),
    labels: Type.Optional(Type.Record(Type.String(), Type.String())),
    annotations: Type.Optional(Type.Record(Type.String(), Type.String())),
    finalizers: Type.Optional(Type.Array(Type.String())),
    ownerReferences: Type.Optional(Type.Array(Type.Unknown())),
  },
  { additionalProperties: true },
);
