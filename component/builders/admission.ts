/**
 * A ValidatingAdmissionPolicy that keeps each agent to its own node, the pattern KubeVirt
 * chose for virt-handler: RBAC lets the agent write HiveData, but a compromised node must
 * not be able to forge, rewrite or delete the HiveData of other nodes (a forged HiveData
 * could point other nodes' alerts at an attacker's callback, or blind them).
 *
 * The node comes from the agent's pod-bound token: the API server puts the pod's node in
 * `request.userInfo.extra["authentication.kubernetes.io/node-name"]` (ServiceAccountTokenPodNodeInfo,
 * beta and on by default from Kubernetes 1.30, GA in 1.32). Without that claim the policy
 * denies (fails closed) instead of trusting the agent.
 */
import {
  ANNOTATION_RESOLVE_REQUEST,
  API_VERSION,
  GROUP,
  LABEL_NODE,
  LABEL_TRAP_ID,
  PLURAL_DATA,
  PLURAL_POLICY,
  POLICY_FINALIZER,
  VERSION,
} from "../../api/index.ts";
import { ANNOTATION_REPORT_WRITER, REPORT_FORMATS, REPORT_NAME } from "../../api/report.ts";

/** Every report kind Hive can write: its report name is Hive's in all of them, whichever it writes. */
const REPORT_RULES = Object.values(REPORT_FORMATS).map((f) => ({
  apiGroups: [f.group],
  apiVersions: ["*"],
  operations: ["CREATE", "UPDATE", "DELETE"],
  resources: [f.plural],
}));
const IS_REPORT = Object.values(REPORT_FORMATS)
  .map((f) => `(request.resource.group == '${f.group}' && request.resource.resource == '${f.plural}')`)
  .join(" || ");

import { tenantCallbackCel } from "../../api/tenancy.ts";
import { AGENT_NAME, agentUsername, hiveLabels, type KubernetesObject } from "./objects.ts";

const NODE_CLAIM = "authentication.kubernetes.io/node-name";
/** The agent's pod, from the same pod-bound token: a Lease holder is `node/pod`. */
const POD_CLAIM = "authentication.kubernetes.io/pod-name";
export const ADMISSION_POLICY_NAME = "hive-agent-node-scope";
export const TENANT_POLICY_NAME = "hive-tenant-scope";

/**
 * The one value of a pod-bound token's claim (`extra`), or '' (no claim: the policies refuse).
 * A credential with no extra at all (a legacy token Secret) has no `extra` field: reading it
 * would be an evaluation error, which the server reports instead of the policy's own message.
 */
function claim(name: string): string {
  return (
    `has(request.userInfo.extra) && '${name}' in request.userInfo.extra && size(request.userInfo.extra['${name}']) == 1` +
    ` ? request.userInfo.extra['${name}'][0] : ''`
  );
}

/** `object`/`oldObject` → the value of its node label, or '' (object is null on DELETE, oldObject on CREATE). */
function nodeLabel(object: "object" | "oldObject"): string {
  return (
    `${object} == null || !has(${object}.metadata.labels) || !('${LABEL_NODE}' in ${object}.metadata.labels)` +
    ` ? '' : ${object}.metadata.labels['${LABEL_NODE}']`
  );
}

/** `object.metadata.<field>` or `empty` when absent (CEL's has() guards a missing field). */
function metadataField(object: "object" | "oldObject", field: string, empty: string): string {
  return `${object} == null || !has(${object}.metadata.${field}) ? ${empty} : ${object}.metadata.${field}`;
}

/**
 * True when an UPDATE changes nothing but the re-resolve request: the loader of a kernel
 * shared by several nodes merge-patches that one annotation onto other nodes' HiveData (a
 * change in the trapped file's directory), and their discover re-resolves. Compared
 * field by field, not as whole objects, because the API server itself changes
 * metadata.managedFields on every write. The value must be the loader's timestamp (digits),
 * so the request cannot carry anything else into another node's object.
 */
const RESOLVE_REQUEST_ONLY = [
  "request.operation == 'UPDATE'",
  "object.spec == oldObject.spec",
  "variables.newLabels == variables.oldLabels",
  `variables.newAnnotations.all(k, k == '${ANNOTATION_RESOLVE_REQUEST}' || (k in variables.oldAnnotations && variables.oldAnnotations[k] == variables.newAnnotations[k]))`,
  `variables.oldAnnotations.all(k, k == '${ANNOTATION_RESOLVE_REQUEST}' || k in variables.newAnnotations)`,
  `'${ANNOTATION_RESOLVE_REQUEST}' in variables.newAnnotations`,
  `variables.newAnnotations['${ANNOTATION_RESOLVE_REQUEST}'].matches('^[0-9]{1,20}$')`,
  "variables.newOwners == variables.oldOwners",
  "variables.newFinalizers == variables.oldFinalizers",
].join(" && ");

export function admissionManifests(
  namespace: string,
  tenantCallbacks: readonly string[],
): KubernetesObject[] {
  return [
    ...boundPolicy(ADMISSION_POLICY_NAME, {
      matchConstraints: {
        resourceRules: [
          {
            apiGroups: [GROUP],
            apiVersions: [VERSION],
            operations: ["CREATE", "UPDATE", "DELETE"],
            resources: [PLURAL_DATA],
          },
          // The agent may patch a HivePolicy only for its finalizer (status is a subresource, not matched here).
          { apiGroups: [GROUP], apiVersions: [VERSION], operations: ["UPDATE"], resources: [PLURAL_POLICY] },
          // Elections: an agent holds a Lease only as itself (node/pod, from its token).
          {
            apiGroups: ["coordination.k8s.io"],
            apiVersions: ["v1"],
            operations: ["CREATE", "UPDATE"],
            resources: ["leases"],
          },
        ],
      },
      // Only the agent's own requests: users and controllers are not affected.
      matchConditions: [
        { name: "is-hive-agent", expression: `request.userInfo.username == '${agentUsername(namespace)}'` },
      ],
      variables: [
        { name: "nodeName", expression: claim(NODE_CLAIM) },
        { name: "podName", expression: claim(POD_CLAIM) },
        { name: "isData", expression: `request.resource.resource == '${PLURAL_DATA}'` },
        { name: "isLease", expression: "request.resource.resource == 'leases'" },
        { name: "newNode", expression: nodeLabel("object") },
        { name: "oldNode", expression: nodeLabel("oldObject") },
        // For the re-resolve exception below (HiveData of another node sharing this node's kernel).
        { name: "newLabels", expression: metadataField("object", "labels", "{}") },
        { name: "oldLabels", expression: metadataField("oldObject", "labels", "{}") },
        { name: "newAnnotations", expression: metadataField("object", "annotations", "{}") },
        { name: "oldAnnotations", expression: metadataField("oldObject", "annotations", "{}") },
        { name: "newOwners", expression: metadataField("object", "ownerReferences", "[]") },
        { name: "oldOwners", expression: metadataField("oldObject", "ownerReferences", "[]") },
        { name: "newFinalizers", expression: metadataField("object", "finalizers", "[]") },
        { name: "oldFinalizers", expression: metadataField("oldObject", "finalizers", "[]") },
        {
          name: "resolveRequestOnly",
          expression: `variables.isData && ${RESOLVE_REQUEST_ONLY}`,
        },
      ],
      validations: [
        {
          expression: "variables.nodeName != ''",
          message:
            `the ${AGENT_NAME} token carries no node name (${NODE_CLAIM}); use a pod-bound ServiceAccount token ` +
            "on Kubernetes 1.30 or later (ServiceAccountTokenPodNodeInfo)",
          reason: "Forbidden",
        },
        // Another node's HiveData first: its denial names the one change allowed there.
        {
          expression:
            "!variables.isData || request.operation == 'CREATE' || variables.oldNode == variables.nodeName ||" +
            " variables.resolveRequestOnly",
          messageExpression: `'the Hive agent of node ' + variables.nodeName + ' may not change or delete HiveData of node ' + variables.oldNode + ' (it may only set ${ANNOTATION_RESOLVE_REQUEST} to a timestamp, changing nothing else)'`,
          reason: "Forbidden",
        },
        {
          expression:
            "!variables.isData || request.operation == 'DELETE' || variables.newNode == variables.nodeName ||" +
            " variables.resolveRequestOnly",
          messageExpression: `'the Hive agent of node ' + variables.nodeName + ' may only write HiveData labelled ${LABEL_NODE}=' + variables.nodeName`,
          reason: "Forbidden",
        },
        {
          expression:
            "!variables.isLease || !has(object.spec.holderIdentity) || object.spec.holderIdentity == '' ||" +
            " (variables.podName != '' && object.spec.holderIdentity == variables.nodeName + '/' + variables.podName)",
          messageExpression:
            "'the Hive agent of pod ' + variables.podName + ' on node ' + variables.nodeName + ' may hold a Lease only as ' + variables.nodeName + '/' + variables.podName + ', not ' + object.spec.holderIdentity",
          reason: "Forbidden",
        },
        {
          expression:
            "variables.isData || variables.isLease || (object.spec == oldObject.spec && variables.newLabels == variables.oldLabels &&" +
            " variables.newAnnotations == variables.oldAnnotations && variables.newOwners == variables.oldOwners &&" +
            ` variables.newFinalizers.filter(f, f != '${POLICY_FINALIZER}') == variables.oldFinalizers.filter(f, f != '${POLICY_FINALIZER}'))`,
          message:
            `the Hive agent may change only its own finalizer (${POLICY_FINALIZER}) and the status of a ${API_VERSION} ` +
            "HivePolicy: not its spec, labels, annotations, owners or other finalizers",
          reason: "Forbidden",
        },
      ],
    }),
    ...agentOnlyManifests(namespace),
    ...tenantScopeManifests(namespace, tenantCallbacks),
  ];
}

export const AGENT_ONLY_POLICY_NAME = "hive-agent-only-writes";

/** An object's label/annotation `key`, or '' (CEL's has() and `in` guard a missing one). */
function metadataEntry(object: "object", map: "labels" | "annotations", key: string): string {
  return `!has(${object}.metadata.${map}) || !('${key}' in ${object}.metadata.${map}) ? '' : ${object}.metadata.${map}['${key}']`;
}

/**
 * What only the agent may write, whoever else RBAC lets write it (a namespace owner with a
 * wildcard role, a cluster-wide `edit` aggregation): HiveData, which arms files in a node's
 * kernel; the per-node trap-error Events (labelled with a node) that fill HivePolicy status;
 * the access Events (labelled with a trap) that PolicyReports fold into `fail`; and Hive's
 * PolicyReport of each namespace, whose name is Hive's (so no tenant can pre-create, rewrite
 * into `pass` or delete it). An agent's reports, Events and PolicyReports name its own node.
 * Deleting HiveData and Events stays open: it only removes.
 */
function agentOnlyManifests(namespace: string): KubernetesObject[] {
  const agent = `request.userInfo.username == '${agentUsername(namespace)}'`;
  const claimedNode = claim(NODE_CLAIM);
  return boundPolicy(AGENT_ONLY_POLICY_NAME, {
    matchConstraints: {
      resourceRules: [
        {
          apiGroups: [GROUP],
          apiVersions: [VERSION],
          operations: ["CREATE", "UPDATE"],
          resources: [PLURAL_DATA],
        },
        // Every Event is matched (an objectSelector would also be honoured by a real server, but
        // the rule below is cheap): only those carrying Hive's node label are constrained.
        { apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE", "UPDATE"], resources: ["events"] },
        ...REPORT_RULES,
      ],
    },
    variables: [
      { name: "isData", expression: `request.resource.resource == '${PLURAL_DATA}'` },
      { name: "isReport", expression: IS_REPORT },
      { name: "isEvent", expression: "request.resource.resource == 'events'" },
      { name: "reportNode", expression: nodeLabel("object") },
    ],
    validations: [
      {
        expression: `!variables.isData || ${agent}`,
        message:
          `only the Hive agent (${agentUsername(namespace)}) may create or change HiveData: ` +
          "it names the files a node's kernel watches; ask the platform team for a HivePolicy instead",
        reason: "Forbidden",
      },
      {
        expression: `variables.isData || variables.reportNode == '' || (${agent} && variables.reportNode == (${claimedNode}))`,
        messageExpression: `'only the Hive agent of node ' + variables.reportNode + ' may write an Event labelled ${LABEL_NODE}=' + variables.reportNode`,
        reason: "Forbidden",
      },
      {
        expression:
          `!variables.isEvent || variables.reportNode != '' || (${metadataEntry("object", "labels", LABEL_TRAP_ID)}) == '' || ` +
          `(${agent} && has(object.reportingInstance) && object.reportingInstance == (${claimedNode}))`,
        message:
          `only the Hive agent may write an Event labelled ${LABEL_TRAP_ID} (an access to a trapped file, ` +
          "which PolicyReports count as a fail), naming its own node as reportingInstance",
        reason: "Forbidden",
      },
      {
        expression:
          `!variables.isReport || request.name != '${REPORT_NAME}' || (${agent} && (request.operation == 'DELETE' || ` +
          `(${metadataEntry("object", "annotations", ANNOTATION_REPORT_WRITER)}) == (${claimedNode})))`,
        message:
          `only the Hive agent may create, change or delete the PolicyReport (or Report) named ${REPORT_NAME} ` +
          `(Hive's findings), and only naming its own node in ${ANNOTATION_REPORT_WRITER}`,
        reason: "Forbidden",
      },
    ],
  });
}

/** A ValidatingAdmissionPolicy (failing closed) and its binding, which denies what it rejects. */
function boundPolicy(name: string, spec: Record<string, unknown>): KubernetesObject[] {
  const labels = hiveLabels("agent");
  return [
    {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "ValidatingAdmissionPolicy",
      metadata: { name, labels },
      spec: { failurePolicy: "Fail", ...spec },
    },
    {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "ValidatingAdmissionPolicyBinding",
      metadata: { name, labels },
      spec: { policyName: name, validationActions: ["Deny"] },
    },
  ];
}

/**
 * Tenancy at admission: a HivePolicy outside the monitor's namespace may trap only pods of its
 * own namespace, so a team allowed to create HivePolicies in its namespace cannot make the root
 * agent resolve (or create) files in other teams' or the system's pods. The agent enforces the
 * same rule (runtime/controllers/match.ts policyReachesPod); this rejects the policy with a
 * reason instead of leaving it to match nothing. A tenant trap's callback lies under one of the
 * monitor's tenantCallbacks (api/tenancy.ts, as the agent checks it); the monitor's own callback
 * is a secret and never named here: a tenant trap without callback goes to it.
 */
function tenantScopeManifests(namespace: string, tenantCallbacks: readonly string[]): KubernetesObject[] {
  return boundPolicy(TENANT_POLICY_NAME, {
    matchConstraints: {
      resourceRules: [
        {
          apiGroups: [GROUP],
          apiVersions: [VERSION],
          operations: ["CREATE", "UPDATE"],
          resources: [PLURAL_POLICY],
        },
      ],
    },
    validations: [
      {
        expression:
          `object.metadata.namespace == '${namespace}' || object.spec.traps.all(t, !has(t.match) || ` +
          "!has(t.match.namespace) || t.match.namespace == object.metadata.namespace)",
        messageExpression:
          `'a HivePolicy outside ${namespace} traps only pods of its own namespace (' + object.metadata.namespace + '): ` +
          `remove match.namespace or set it to ' + object.metadata.namespace + '; policies reaching other namespaces belong in ${namespace}'`,
        reason: "Forbidden",
      },
      {
        expression:
          `object.metadata.namespace == '${namespace}' || object.spec.traps.all(t, !has(t.callback) || ` +
          `${tenantCallbackCel("t.callback", tenantCallbacks)})`,
        message:
          `a HivePolicy outside ${namespace} may name a trap callback only under ` +
          (tenantCallbacks.length > 0
            ? tenantCallbacks.join(", ")
            : "the monitor's tenantCallbacks (it has none)") +
          ", written as URL parsing writes it (no dot segments, encoded dots or slashes, userinfo or backslashes)" +
          ": remove the trap's callback (its alerts then go to the monitor's callback) or ask the platform team" +
          " to add a prefix of its URL to the monitor's tenantCallbacks",
        reason: "Forbidden",
      },
    ],
  });
}
