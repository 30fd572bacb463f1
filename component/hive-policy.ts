/**
 * HivePolicy as a typed resource of its own, for teams that add traps to a monitor someone
 * else deployed: the agent follows HivePolicies in every namespace.
 */
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { MAX_TRAPS_PER_POLICY } from "../api/index.ts";
import type { TrapArgs } from "./args.ts";
import { policyManifest } from "./builders/policies.ts";
import { type ArgProblem, formatProblems } from "./builders/problems.ts";
import { isPlainObject, toHiveTrap, trapProblems, unknownKeys } from "./builders/traps.ts";
import { DNS_LABEL, DNS_SUBDOMAIN } from "./config.ts";

export interface HivePolicyArgs {
  /** Namespace of the HivePolicy object (commonly the team's own). */
  namespace: string;
  /** Name of the HivePolicy object. Default: the resource's Pulumi name. */
  name?: string;
  /** The traps; at least one. */
  traps: TrapArgs[];
  /** Extra labels on the object. */
  labels?: Record<string, string>;
}

/** Problems of HivePolicyArgs, named by option; empty when valid. */
export function hivePolicyProblems(name: string, args: HivePolicyArgs): ArgProblem[] {
  if (!isPlainObject(args))
    return [{ option: "(args)", message: "must be an object with { namespace, traps }" }];
  const problems = unknownKeys(args, ["namespace", "name", "traps", "labels"], "");
  if (typeof args.namespace !== "string" || !DNS_LABEL.test(args.namespace)) {
    problems.push({
      option: "namespace",
      message: `${JSON.stringify(args.namespace)} is not a namespace name`,
    });
  }
  if (!DNS_SUBDOMAIN.test(args.name ?? name)) {
    problems.push({
      option: "name",
      message: `${JSON.stringify(args.name ?? name)} is not a HivePolicy name (a DNS subdomain); set \`name\``,
    });
  }
  if (!Array.isArray(args.traps) || args.traps.length === 0) {
    problems.push({
      option: "traps",
      message: 'must list at least one trap such as { path: "/etc/shadow" }',
    });
  } else {
    for (const [i, t] of args.traps.entries()) problems.push(...trapProblems(t, `traps[${i}]`));
    if (args.traps.length > MAX_TRAPS_PER_POLICY) {
      problems.push({ option: "traps", message: `at most ${MAX_TRAPS_PER_POLICY} traps fit one HivePolicy` });
    }
  }
  return problems;
}

export class HivePolicy extends k8s.apiextensions.CustomResource {
  constructor(name: string, args: HivePolicyArgs, opts?: pulumi.CustomResourceOptions) {
    const problems = hivePolicyProblems(name, args);
    if (problems.length > 0) {
      throw new pulumi.ResourceError(
        `HivePolicy "${name}" has invalid options:\n${formatProblems(problems)}`,
        undefined,
      );
    }
    const spec = { traps: args.traps.map(toHiveTrap) };
    super(name, policyManifest(args.name ?? name, args.namespace, spec, args.labels) as never, opts);
  }
}
