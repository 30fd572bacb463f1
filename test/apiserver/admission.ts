/**
 * ValidatingAdmissionPolicies as kube-apiserver evaluates them, from the policies and bindings
 * stored in the stand-in (a test creates the ones the component renders): matchConstraints,
 * matchConditions, variables, validations and messageExpression in CEL over `object`,
 * `oldObject`, `request` (with the authenticated userInfo) and `variables`. A binding's
 * `Deny` action refuses the request with the validation's reason; failurePolicy Fail refuses
 * it when an expression cannot be evaluated. What the stand-in cannot evaluate (params,
 * namespace and object selectors) is refused loudly rather than ignored.
 */
import { parse } from "@marcbachmann/cel-js";
import type { UserInfo } from "./authn.ts";
import type { ResourceDef } from "./resources.ts";
import { ApiError, errors } from "./status.ts";
import type { KubeObject, Store } from "./store.ts";

export type Operation = "CREATE" | "UPDATE" | "DELETE" | "CONNECT";

export interface AdmissionRequest {
  def: ResourceDef;
  subresource?: string | undefined;
  namespace?: string | undefined;
  name: string;
  operation: Operation;
  user: UserInfo;
  object: KubeObject | null;
  oldObject: KubeObject | null;
}

interface ResourceRule {
  apiGroups?: string[];
  apiVersions?: string[];
  operations?: string[];
  resources?: string[];
  scope?: string;
}

interface MatchResources {
  resourceRules?: ResourceRule[];
  excludeResourceRules?: ResourceRule[];
  namespaceSelector?: Record<string, unknown>;
  objectSelector?: Record<string, unknown>;
}

interface PolicySpec {
  failurePolicy?: "Fail" | "Ignore";
  paramKind?: unknown;
  matchConstraints?: MatchResources;
  matchConditions?: { name: string; expression: string }[];
  variables?: { name: string; expression: string }[];
  validations?: { expression: string; message?: string; messageExpression?: string; reason?: string }[];
}

interface BindingSpec {
  policyName?: string;
  paramRef?: unknown;
  matchResources?: MatchResources;
  validationActions?: string[];
}

const ADMISSION_GROUP = "admissionregistration.k8s.io";
const programs = new Map<string, (ctx: Record<string, unknown>) => unknown>();

function program(expression: string): (ctx: Record<string, unknown>) => unknown {
  let fn = programs.get(expression);
  if (!fn) {
    fn = parse(expression) as (ctx: Record<string, unknown>) => unknown;
    programs.set(expression, fn);
  }
  return fn;
}

/** CEL's view of JSON: integers are int64 (BigInt in cel-js). */
function celValue(value: unknown): unknown {
  if (typeof value === "number" && Number.isInteger(value)) return BigInt(value);
  if (Array.isArray(value)) return value.map(celValue);
  if (value !== null && typeof value === "object")
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, celValue(v)]));
  return value;
}

function isEmpty(selector: Record<string, unknown> | undefined): boolean {
  return (
    selector === undefined ||
    Object.values(selector).every(
      (v) => v === undefined || (Array.isArray(v) ? v.length === 0 : Object.keys(v as object).length === 0),
    )
  );
}

function ruleMatches(rule: ResourceRule, r: AdmissionRequest): boolean {
  const any = (list: string[] | undefined, v: string) => (list ?? []).some((x) => x === "*" || x === v);
  const resource = r.subresource ? `${r.def.plural}/${r.subresource}` : r.def.plural;
  const resources = rule.resources ?? [];
  const resourceOk = resources.some(
    (x) =>
      x === "*" ||
      x === resource ||
      (r.subresource !== undefined && (x === `*/${r.subresource}` || x === `${r.def.plural}/*`)) ||
      (r.subresource === undefined && x === "*/*") ||
      x === "*/*",
  );
  const scope = rule.scope ?? "*";
  const scopeOk = scope === "*" || (scope === "Namespaced") === r.def.namespaced;
  return (
    resourceOk &&
    scopeOk &&
    any(rule.apiGroups, r.def.group) &&
    any(rule.apiVersions, r.def.version) &&
    any(rule.operations, r.operation)
  );
}

function matches(m: MatchResources | undefined, r: AdmissionRequest, what: string): boolean {
  if (!m) return true;
  if (!isEmpty(m.namespaceSelector) || !isEmpty(m.objectSelector)) {
    throw new Error(`${what}: namespaceSelector and objectSelector are not evaluated by the API stand-in`);
  }
  if (m.resourceRules && !m.resourceRules.some((rule) => ruleMatches(rule, r))) return false;
  return !(m.excludeResourceRules ?? []).some((rule) => ruleMatches(rule, r));
}

function requestOf(r: AdmissionRequest): Record<string, unknown> {
  const resource = { group: r.def.group, version: r.def.version, resource: r.def.plural };
  const kind = { group: r.def.group, version: r.def.version, kind: r.def.kind };
  return {
    uid: "stand-in",
    kind,
    resource,
    subResource: r.subresource ?? "",
    requestKind: kind,
    requestResource: resource,
    requestSubResource: r.subresource ?? "",
    name: r.name,
    namespace: r.namespace ?? "",
    operation: r.operation,
    userInfo: {
      username: r.user.username,
      uid: r.user.uid ?? "",
      groups: r.user.groups,
      extra: r.user.extra,
    },
    dryRun: false,
  };
}

/** Evaluates one policy; returns the denial (reason, message) or undefined when it admits. */
function evaluatePolicy(
  spec: PolicySpec,
  r: AdmissionRequest,
): { reason: string; message: string } | undefined {
  if (spec.paramKind !== undefined) throw new Error("paramKind is not evaluated by the API stand-in");
  const context: Record<string, unknown> = {
    object: celValue(r.object),
    oldObject: celValue(r.oldObject),
    request: celValue(requestOf(r)),
  };
  for (const c of spec.matchConditions ?? []) {
    if (program(c.expression)(context) !== true) return undefined;
  }
  // Variables are lazy, as upstream's: one that cannot be evaluated fails only where it is used.
  const variables: Record<string, unknown> = {};
  for (const v of spec.variables ?? []) {
    let cached: { value: unknown } | undefined;
    Object.defineProperty(variables, v.name, {
      enumerable: true,
      get: () => {
        cached ??= { value: program(v.expression)(context) };
        return cached.value;
      },
    });
  }
  context.variables = variables;
  for (const v of spec.validations ?? []) {
    if (program(v.expression)(context) === true) continue;
    let message = v.message ?? `failed expression: ${v.expression}`;
    if (v.messageExpression) {
      const m = program(v.messageExpression)(context);
      if (typeof m === "string" && m !== "") message = m;
    }
    return { reason: v.reason ?? "Invalid", message };
  }
  return undefined;
}

/** Throws the API error a real server answers when a bound policy denies `r`. */
export function admit(store: Store, r: AdmissionRequest): void {
  const policies = new Map(
    store.stored(ADMISSION_GROUP, "validatingadmissionpolicies").map((p) => [p.metadata.name ?? "", p]),
  );
  for (const binding of store.stored(ADMISSION_GROUP, "validatingadmissionpolicybindings")) {
    const b = (binding as { spec?: BindingSpec }).spec ?? {};
    const policy = policies.get(b.policyName ?? "");
    if (!policy) continue;
    const spec = (policy as { spec?: PolicySpec }).spec ?? {};
    const policyName = policy.metadata.name ?? "";
    const bindingName = binding.metadata.name ?? "";
    const prefix = `ValidatingAdmissionPolicy '${policyName}' with binding '${bindingName}' denied request`;
    if (b.paramRef !== undefined) throw new Error(`${prefix}: paramRef is not evaluated by the API stand-in`);
    let denial: { reason: string; message: string } | undefined;
    try {
      if (!matches(spec.matchConstraints, r, policyName) || !matches(b.matchResources, r, bindingName))
        continue;
      denial = evaluatePolicy(spec, r);
    } catch (err) {
      if (err instanceof ApiError) throw err;
      if (spec.failurePolicy === "Ignore") continue;
      denial = { reason: "Invalid", message: `expression evaluation failed: ${(err as Error).message}` };
    }
    if (denial && (b.validationActions ?? []).includes("Deny")) {
      throw errors.admissionDenied(denial.reason, `${prefix}: ${denial.message}`, r.def, r.name);
    }
  }
}
