/**
 * Least-privilege RBAC for the agent: no wildcards, every verb justified below. The agent
 * writes only HiveData (in its own namespace), Leases (its elections) and Events; everything
 * else is read-only, except the HivePolicy finalizer and status it owns. What RBAC cannot
 * express (writes limited to the agent's own node) the ValidatingAdmissionPolicy in
 * admission.ts adds.
 */
import { GROUP, PLURAL_DATA, PLURAL_POLICY } from "../../api/index.ts";
import { REPORT_FORMATS, type ReportFormat } from "../../api/report.ts";
import type { CallbackValues } from "../args.ts";
import { AGENT_NAME, hiveLabels, type KubernetesObject } from "./objects.ts";

export interface PolicyRule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
  resourceNames?: string[];
}

/** Cluster-wide rules: what the agent must see or touch in every namespace. */
export function clusterRules(reports: ReportFormat | undefined = "policyreport"): PolicyRule[] {
  const rules: PolicyRule[] = [
    // Discover and the loader follow every HivePolicy (policies live in any namespace).
    { apiGroups: [GROUP], resources: [PLURAL_POLICY], verbs: ["list", "watch", "patch"] },
    // `patch` above is for the finalizer only: admission rejects any other change by the agent.
    // Status: matched containers, per-trap errors, conditions.
    { apiGroups: [GROUP], resources: [`${PLURAL_POLICY}/status`], verbs: ["update"] },
    // Discover watches only the pods of its own node (field selector spec.nodeName). RBAC
    // cannot restrict a grant by field selector, so this rule reads pods cluster-wide; the
    // agent's requests are what narrow it.
    { apiGroups: [""], resources: ["pods"], verbs: ["list", "watch"] },
    // The pods role also watches the agent's own pods (in the monitor's namespace, by the
    // DaemonSet's labels) for their Ready condition, and the pods of nodes without a ready agent
    // (by field selector), to report what no agent watches (runtime/controllers/coverage-feeds.ts).
    // Nodes:
    // - get: a kernel's Lease is genuinely held only by an agent of a node whose kubelet reports
    //   that kernel (status.nodeInfo.bootID): candidates read the holder's Node
    //   (runtime/agent/loader-election.ts);
    // - list, watch: the pods role learns of nodes where no agent runs at all (a taint the
    //   DaemonSet does not tolerate, another architecture), which no agent can report. Names only
    //   are kept. Every kubelet may list Nodes already: a compromised node learns nothing new.
    { apiGroups: [""], resources: ["nodes"], verbs: ["get", "list", "watch"] },
    // Events (core v1 only; the agent never uses events.k8s.io), in any namespace:
    // - an Event on the accessed pod for each alert, in the pod's namespace: create, then patch
    //   its count (runtime/alerts/pod-events.ts);
    // - per-node trap-error reports on a HivePolicy, in the policy's namespace: listed once
    //   cluster-wide by label, created, replaced (update) and deleted when fixed
    //   (runtime/controllers/kube-ports.ts);
    // - the elected pod controller watches those reports (list, watch) to fill the policy's
    //   status, and deletes a deleted policy's reports (runtime/agent/node-agent.ts).
    {
      apiGroups: [""],
      resources: ["events"],
      verbs: ["create", "patch", "update", "delete", "list", "watch"],
    },
  ];
  // PolicyReports: the elected pods role writes one per namespace with selected pods (created,
  // replaced, deleted when the namespace has none left) and watches them to take up the fails a
  // previous writer left and to put back a report someone else changed (runtime/reports/).
  // Admission keeps the report's name to the agent.
  if (reports)
    rules.push({
      apiGroups: [REPORT_FORMATS[reports].group],
      resources: [REPORT_FORMATS[reports].plural],
      verbs: ["list", "watch", "create", "update", "delete"],
    });
  return rules;
}

/** Rules in the monitor's namespace: the agent's own objects. */
export function namespaceRules(callback: CallbackValues | undefined): PolicyRule[] {
  const rules: PolicyRule[] = [
    // One HiveData per trap × container; the admission policy keeps each agent to its node's.
    {
      apiGroups: [GROUP],
      resources: [PLURAL_DATA],
      verbs: ["get", "list", "watch", "create", "update", "patch", "delete"],
    },
    // Elections: a Lease per kernel (loader) and one for the pod controller.
    {
      apiGroups: ["coordination.k8s.io"],
      resources: ["leases"],
      verbs: ["get", "create", "update"],
    },
    // Its own DaemonSet, read by a stopping agent: gone or being deleted is an uninstall.
    { apiGroups: ["apps"], resources: ["daemonsets"], verbs: ["get"], resourceNames: [AGENT_NAME] },
  ];
  // Callback credentials, read by name: only the Secrets the configuration names. Watched too
  // (list/watch with fieldSelector metadata.name, which the API server checks against
  // resourceNames) so that a rotated token applies without restarting the agents.
  const secrets = [callback?.headersSecret, callback?.signingSecret?.name].filter(
    (s): s is string => s !== undefined,
  );
  if (secrets.length > 0) {
    rules.push({
      apiGroups: [""],
      resources: ["secrets"],
      verbs: ["get", "list", "watch"],
      resourceNames: [...new Set(secrets)],
    });
  }
  return rules;
}

export function rbacManifests(
  namespace: string,
  callback: CallbackValues | undefined,
  reports: ReportFormat | undefined = "policyreport",
): KubernetesObject[] {
  const labels = hiveLabels("agent");
  const subjects = [{ kind: "ServiceAccount", name: AGENT_NAME, namespace }];
  return [
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: { name: AGENT_NAME, labels },
      rules: clusterRules(reports),
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: { name: AGENT_NAME, labels },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: AGENT_NAME },
      subjects,
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "Role",
      metadata: { name: AGENT_NAME, namespace, labels },
      rules: namespaceRules(callback),
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "RoleBinding",
      metadata: { name: AGENT_NAME, namespace, labels },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: AGENT_NAME },
      subjects,
    },
  ];
}

/**
 * With the PolicyReport CRD Hive installs: every namespace's `view` (and so `edit` and `admin`)
 * role reads PolicyReports, so a team reads its namespace's report where it reads its pods.
 * Writing stays the agent's (admission keeps Hive's report to it).
 */
export function reportReaderRole(format: ReportFormat): KubernetesObject {
  return {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "ClusterRole",
    metadata: {
      name: `${AGENT_NAME}-policyreport-reader`,
      labels: {
        ...hiveLabels("agent"),
        "rbac.authorization.k8s.io/aggregate-to-view": "true",
        "rbac.authorization.k8s.io/aggregate-to-edit": "true",
        "rbac.authorization.k8s.io/aggregate-to-admin": "true",
      },
    },
    rules: [
      {
        apiGroups: [REPORT_FORMATS[format].group],
        resources: [REPORT_FORMATS[format].plural],
        verbs: ["get", "list", "watch"],
      },
    ],
  };
}
