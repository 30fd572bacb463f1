/**
 * RBAC authorization as kube-apiserver's RBAC authorizer decides it, from the Role,
 * ClusterRole, RoleBinding and ClusterRoleBinding objects stored in the stand-in (a test
 * creates the ones the component renders). `system:masters` is allowed everything, as the
 * bootstrap policy does; nothing else is allowed unless a binding grants it.
 */
import type { UserInfo } from "./authn.ts";
import type { KubeObject, Store } from "./store.ts";

export interface Attributes {
  user: UserInfo;
  verb: string;
  apiGroup: string;
  resource: string;
  subresource?: string | undefined;
  namespace?: string | undefined;
  /** The object's name; for a list or watch, the `metadata.name=` of its field selector. */
  name?: string | undefined;
}

interface Rule {
  apiGroups?: string[];
  resources?: string[];
  verbs?: string[];
  resourceNames?: string[];
}

interface Subject {
  kind: string;
  name: string;
  namespace?: string;
}

interface Binding {
  roleRef: { kind: string; name: string };
  subjects?: Subject[];
}

const RBAC_GROUP = "rbac.authorization.k8s.io";

function subjectMatches(s: Subject, user: UserInfo, bindingNamespace: string | undefined): boolean {
  switch (s.kind) {
    case "User":
      return s.name === user.username;
    case "Group":
      return user.groups.includes(s.name);
    case "ServiceAccount": {
      const ns = s.namespace ?? bindingNamespace;
      return ns !== undefined && user.username === `system:serviceaccount:${ns}:${s.name}`;
    }
    default:
      return false;
  }
}

function has(list: string[] | undefined, value: string): boolean {
  return (list ?? []).some((v) => v === "*" || v === value);
}

/** The rule grants the request (upstream's RuleAllows, for resource requests). */
export function ruleAllows(rule: Rule, a: Attributes): boolean {
  if (!has(rule.verbs, a.verb) || !has(rule.apiGroups, a.apiGroup)) return false;
  const combined = a.subresource ? `${a.resource}/${a.subresource}` : a.resource;
  const resources = rule.resources ?? [];
  const resourceOk = resources.some(
    (r) => r === "*" || r === combined || (a.subresource !== undefined && r === `*/${a.subresource}`),
  );
  if (!resourceOk) return false;
  if (!rule.resourceNames || rule.resourceNames.length === 0) return true;
  // A rule limited to names never grants a request without one (create, an unfiltered list).
  return a.name !== undefined && rule.resourceNames.includes(a.name);
}

export function authorize(store: Store, a: Attributes): boolean {
  if (a.user.groups.includes("system:masters")) return true;
  const rulesOf = (kind: string, name: string, namespace: string | undefined): Rule[] => {
    const plural = kind === "ClusterRole" ? "clusterroles" : "roles";
    const scope = kind === "ClusterRole" ? undefined : namespace;
    const role = store.stored(RBAC_GROUP, plural, scope).find((o) => o.metadata.name === name);
    return ((role as (KubeObject & { rules?: Rule[] }) | undefined)?.rules ?? []) as Rule[];
  };
  for (const b of store.stored(RBAC_GROUP, "clusterrolebindings") as (KubeObject & Binding)[]) {
    if (!(b.subjects ?? []).some((s) => subjectMatches(s, a.user, undefined))) continue;
    if (b.roleRef.kind !== "ClusterRole") continue;
    if (rulesOf("ClusterRole", b.roleRef.name, undefined).some((r) => ruleAllows(r, a))) return true;
  }
  if (a.namespace === undefined) return false;
  for (const b of store.stored(RBAC_GROUP, "rolebindings", a.namespace) as (KubeObject & Binding)[]) {
    if (!(b.subjects ?? []).some((s) => subjectMatches(s, a.user, a.namespace))) continue;
    if (rulesOf(b.roleRef.kind, b.roleRef.name, a.namespace).some((r) => ruleAllows(r, a))) return true;
  }
  return false;
}

/** The 403 message kube-apiserver writes. */
export function forbiddenMessage(a: Attributes): string {
  const qualified = a.apiGroup === "" ? a.resource : `${a.resource}.${a.apiGroup}`;
  const named = a.name !== undefined ? ` "${a.name}"` : "";
  const sub = a.subresource ? ` with subresource "${a.subresource}"` : "";
  const where = a.namespace !== undefined ? ` in the namespace "${a.namespace}"` : " at the cluster scope";
  return `${qualified}${named} is forbidden: User "${a.user.username}" cannot ${a.verb} resource "${a.resource}"${sub} in API group "${a.apiGroup}"${where}`;
}
