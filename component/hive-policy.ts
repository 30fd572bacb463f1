/**
 * HivePolicy as a typed resource of its own, for teams that add traps to a monitor someone
 * else deployed: the agent follows HivePolicies in every namespace.
 */
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { MAX_TRAPS_PER_POLICY } from "../api/index.ts";
import type { Plain, TrapArgs } from "./args.ts";
import type { KubernetesObject } from "./builders/objects.ts";
import { policyManifest } from "./builders/policies.ts";
import { type ArgProblem, formatProblems } from "./builders/problems.ts";
import { isPlainObject, toHiveTrap, trapProblems, unknownKeys } from "./builders/traps.ts";
import { DNS_LABEL, DNS_SUBDOMAIN } from "./config.ts";
import { findInputs, knownProblems, withValues } from "./inputs.ts";
import { resolvedObject, resolveObjects } from "./resolve.ts";

/** Every leaf takes a `pulumi.Input`, validated like HiveMonitor's (known values before anything is created). */
export interface HivePolicyArgs {
  /** Namespace of the HivePolicy object (commonly the team's own). */
  namespace: pulumi.Input<string>;
  /** Name of the HivePolicy object. Default: the resource's Pulumi name. */
  name?: pulumi.Input<string>;
  /** The traps; at least one. */
  traps: TrapArgs[];
  /** Extra labels on the object. */
  labels?: pulumi.Input<Record<string, pulumi.Input<string>>>;
}

/** Problems of HivePolicyArgs (plain values), named by option; empty when valid. */
export function hivePolicyProblems(name: string, args: Plain<HivePolicyArgs>): ArgProblem[] {
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

function manifest(name: string, args: Plain<HivePolicyArgs>): KubernetesObject {
  const problems = hivePolicyProblems(name, args);
  if (problems.length > 0) {
    throw new pulumi.ResourceError(
      `HivePolicy "${name}" has invalid options:\n${formatProblems(problems)}`,
      undefined,
    );
  }
  const spec = { traps: args.traps.map(toHiveTrap) };
  return policyManifest(args.name ?? name, args.namespace, spec, args.labels);
}

export class HivePolicy extends k8s.apiextensions.CustomResource {
  constructor(name: string, args: HivePolicyArgs, opts?: pulumi.CustomResourceOptions) {
    const pending = findInputs(args);
    const known = withValues(args, pending, []) as Plain<HivePolicyArgs>;
    if (pending.length === 0) {
      super(name, manifest(name, known) as never, opts);
      return;
    }
    // Known values first, before anything is created; the rest once resolved, with the same messages.
    const problems = knownProblems(hivePolicyProblems(name, known), pending);
    if (problems.length > 0) {
      throw new pulumi.ResourceError(
        `HivePolicy "${name}" has invalid options:\n${formatProblems(problems)}`,
        undefined,
      );
    }
    const resolved = resolveObjects(pending, (values) => [
      manifest(name, withValues(args, pending, values) as Plain<HivePolicyArgs>),
    ]);
    const shape = policyManifest("shape", "shape", { traps: [] });
    super(name, resolvedObject(resolved, 0, shape) as never, opts);
  }
}
