/**
 * The agent pod's options: where it is scheduled (`nodeSelector`, `tolerations`, `affinity`,
 * `priorityClassName`), what it gets (`resources`), its metadata (`podLabels`, `podAnnotations`)
 * and how it is replaced (`updateStrategy`).
 */
import type {
  Affinity,
  DaemonSetUpdateStrategy,
  HiveMonitorValues,
  Plain,
  ResourceRequirements,
  Toleration,
} from "../args.ts";
import { AGENT_ARCHITECTURES, AGENT_NODE_SELECTOR, AGENT_SELECTOR } from "../builders/daemonset.ts";
import { isPlainObject, unknownKeys } from "../builders/traps.ts";
import { type Checker, DNS_SUBDOMAIN, LABEL_KEY, QUANTITY } from "./checker.ts";
import {
  DEFAULT_PRIORITY_CLASS,
  DEFAULT_RESOURCES,
  DEFAULT_TOLERATIONS,
  DEFAULT_UPDATE_STRATEGY,
} from "./defaults.ts";
import type { HiveConfig } from "./hive-config.ts";

type PodOptions = Pick<
  HiveConfig,
  | "nodeSelector"
  | "tolerations"
  | "affinity"
  | "resources"
  | "podLabels"
  | "podAnnotations"
  | "updateStrategy"
  | "priorityClassName"
>;

export function checkPodOptions(c: Checker, args: HiveMonitorValues): PodOptions {
  const nodeSelector = checkNodeSelector(c, args.nodeSelector ?? {});
  const tolerations = checkTolerations(c, args.tolerations);
  const affinity = checkAffinity(c, args.affinity);
  const resources = checkResources(c, args.resources);
  checkPodMetadata(c, args.podLabels, args.podAnnotations);
  const updateStrategy = checkUpdateStrategy(c, args.updateStrategy);
  const priorityClassName = args.priorityClassName ?? DEFAULT_PRIORITY_CLASS;
  if (priorityClassName !== "")
    c.name("priorityClassName", priorityClassName, DNS_SUBDOMAIN, "a PriorityClass name");
  return {
    nodeSelector,
    tolerations,
    affinity,
    resources,
    podLabels: args.podLabels ?? {},
    podAnnotations: args.podAnnotations ?? {},
    updateStrategy,
    // "" asks for no priority class at all.
    priorityClassName: priorityClassName === "" ? undefined : priorityClassName,
  };
}

function checkNodeSelector(c: Checker, nodeSelector: Record<string, string>): Record<string, string> {
  c.labels("nodeSelector", nodeSelector);
  if (typeof nodeSelector !== "object" || nodeSelector === null) return nodeSelector;
  for (const [key, fixed] of Object.entries(AGENT_NODE_SELECTOR)) {
    const given = (nodeSelector as Record<string, unknown>)[key];
    if (given !== undefined && given !== fixed) {
      c.add(`nodeSelector.${key}`, `the agent runs only where ${key} is ${fixed}; remove this entry`);
    }
  }
  // Narrowing to one built architecture is fine; another would leave the DaemonSet on no node.
  const arch = (nodeSelector as Record<string, unknown>)["kubernetes.io/arch"];
  if (arch !== undefined && !AGENT_ARCHITECTURES.includes(arch as string))
    c.add(
      "nodeSelector.kubernetes.io/arch",
      `the agent runs only where kubernetes.io/arch is ${AGENT_ARCHITECTURES.join(" or ")} (its kernel program is built for those); remove this entry or name one of them`,
    );
  return nodeSelector;
}

function checkTolerations(c: Checker, value: unknown): Plain<Toleration>[] {
  if (value === undefined) return DEFAULT_TOLERATIONS;
  if (!Array.isArray(value)) {
    c.add("tolerations", "must be a list of tolerations");
    return [];
  }
  for (const [i, t] of value.entries()) {
    const at = `tolerations[${i}]`;
    if (!isPlainObject(t)) {
      c.add(at, "must be an object");
      continue;
    }
    c.problems.push(...unknownKeys(t, ["key", "operator", "value", "effect", "tolerationSeconds"], at));
    if (t.operator !== undefined) c.oneOf(`${at}.operator`, t.operator, ["Exists", "Equal"]);
    if (t.effect !== undefined)
      c.oneOf(`${at}.effect`, t.effect, ["NoSchedule", "PreferNoSchedule", "NoExecute"]);
    if (t.operator === "Exists" && t.value !== undefined)
      c.add(`${at}.value`, 'must be empty with operator "Exists"');
    if (t.key !== undefined && (typeof t.key !== "string" || !LABEL_KEY.test(t.key))) {
      c.add(`${at}.key`, "must be a taint key such as node-role.kubernetes.io/control-plane");
    }
    if (t.tolerationSeconds !== undefined && !Number.isInteger(t.tolerationSeconds)) {
      c.add(`${at}.tolerationSeconds`, "must be a whole number of seconds");
    }
  }
  return value as Plain<Toleration>[];
}

function checkAffinity(c: Checker, value: unknown): Plain<Affinity> | undefined {
  if (value === undefined) return undefined;
  if (!isPlainObject(value)) {
    c.add("affinity", "must be { nodeAffinity?, podAffinity?, podAntiAffinity? } as in a pod spec");
    return undefined;
  }
  c.problems.push(...unknownKeys(value, ["nodeAffinity", "podAffinity", "podAntiAffinity"], "affinity"));
  return value as Plain<Affinity>;
}

function checkResources(c: Checker, value: unknown): Plain<ResourceRequirements> {
  if (value === undefined) return DEFAULT_RESOURCES;
  if (!isPlainObject(value)) {
    c.add("resources", 'must be { requests?: { cpu: "50m" }, limits?: { memory: "512Mi" } }');
    return {};
  }
  c.problems.push(...unknownKeys(value, ["requests", "limits", "claims"], "resources"));
  for (const part of ["requests", "limits"] as const) {
    const quantities = value[part];
    if (quantities === undefined) continue;
    if (!isPlainObject(quantities)) {
      c.add(`resources.${part}`, 'must map resource names to quantities, e.g. { memory: "512Mi" }');
      continue;
    }
    for (const [name, q] of Object.entries(quantities)) {
      if (typeof q !== "string" || !QUANTITY.test(q)) {
        c.add(
          `resources.${part}.${name}`,
          `${JSON.stringify(q)} is not a quantity such as "100m" or "256Mi" (write it as a string)`,
        );
      }
    }
  }
  return value as Plain<ResourceRequirements>;
}

/** Label keys the DaemonSet's selector and Hive's own labels use: a pod label must not change them. */
const RESERVED_POD_LABELS = [...Object.keys(AGENT_SELECTOR), "app.kubernetes.io/instance"];

function checkPodMetadata(c: Checker, labels: unknown, annotations: unknown): void {
  if (labels !== undefined && c.labels("podLabels", labels)) {
    for (const key of Object.keys(labels)) {
      if (RESERVED_POD_LABELS.includes(key))
        c.add(`podLabels.${key}`, "is set by Hive (the DaemonSet selects its pods by it); use another key");
    }
  }
  if (annotations === undefined) return;
  if (!isPlainObject(annotations)) {
    c.add("podAnnotations", 'must map annotation names to values, e.g. { "example.com/team": "security" }');
    return;
  }
  for (const [k, v] of Object.entries(annotations)) {
    if (!LABEL_KEY.test(k)) c.add(`podAnnotations.${k}`, "the key is not a valid annotation name");
    else if (typeof v !== "string") c.add(`podAnnotations.${k}`, `${JSON.stringify(v)} must be a string`);
  }
}

/** An int or a percentage, as Kubernetes' IntOrString fields of a rolling update take them. */
const INT_OR_PERCENT = /^\d+%?$/;

function checkUpdateStrategy(c: Checker, value: unknown): Plain<DaemonSetUpdateStrategy> {
  if (value === undefined) return DEFAULT_UPDATE_STRATEGY;
  if (!isPlainObject(value)) {
    c.add(
      "updateStrategy",
      'must be { type: "RollingUpdate", rollingUpdate?: { maxUnavailable } } or { type: "OnDelete" }',
    );
    return DEFAULT_UPDATE_STRATEGY;
  }
  c.problems.push(...unknownKeys(value, ["type", "rollingUpdate"], "updateStrategy"));
  const type = value.type ?? "RollingUpdate";
  c.oneOf("updateStrategy.type", type, ["RollingUpdate", "OnDelete"]);
  const rolling = value.rollingUpdate;
  if (rolling === undefined) return value as Plain<DaemonSetUpdateStrategy>;
  if (type !== "RollingUpdate")
    c.add("updateStrategy.rollingUpdate", 'only applies with type "RollingUpdate"');
  else if (!isPlainObject(rolling))
    c.add("updateStrategy.rollingUpdate", "must be { maxUnavailable?, maxSurge? }");
  else checkRollingUpdate(c, rolling);
  return value as Plain<DaemonSetUpdateStrategy>;
}

function checkRollingUpdate(c: Checker, rolling: Record<string, unknown>): void {
  c.problems.push(...unknownKeys(rolling, ["maxUnavailable", "maxSurge"], "updateStrategy.rollingUpdate"));
  for (const key of ["maxUnavailable", "maxSurge"]) {
    const v = rolling[key];
    if (v === undefined) continue;
    if (!(Number.isInteger(v) && (v as number) >= 0) && !(typeof v === "string" && INT_OR_PERCENT.test(v))) {
      c.add(
        `updateStrategy.rollingUpdate.${key}`,
        `${JSON.stringify(v)} must be a number of pods or a percentage such as "10%"`,
      );
    }
  }
}
