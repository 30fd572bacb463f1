/**
 * Objects built from arguments with Outputs among their leaves: the builders run once the values
 * are known (inside `apply`, validating them with the same messages), and each top-level field of
 * each object becomes an Output of its own — secret exactly when a secret input reaches it, so
 * that a secret callback URL marks the DaemonSet's spec secret and leaves its name readable.
 */
import { isDeepStrictEqual } from "node:util";
import * as pulumi from "@pulumi/pulumi";
import type { KubernetesObject } from "./builders/objects.ts";
import { type PendingInput, perturb } from "./inputs.ts";

export interface ResolvedObjects {
  objects: KubernetesObject[];
  /** Per object, the top-level fields a secret input reaches. */
  secretFields: Set<string>[];
}

/**
 * Resolves `pending`, then `build(values)` (which throws on invalid values). To learn which fields
 * carry a secret, builds again with every secret value changed: a field that changes with it
 * carries it. When that second build fails (the changed value is invalid), every field is secret.
 */
export function resolveObjects(
  pending: readonly PendingInput[],
  build: (values: unknown[]) => KubernetesObject[],
): pulumi.Output<ResolvedObjects> {
  const values = pulumi.unsecret(pulumi.all(pending.map((p) => p.value as pulumi.Input<unknown>)));
  const secrets = pulumi.output(
    Promise.all(
      pending.map((p) =>
        pulumi.Output.isInstance(p.value) ? pulumi.isSecret(p.value) : Promise.resolve(false),
      ),
    ),
  );
  return pulumi.all([values, secrets]).apply(([vals, flags]) => {
    const objects = build(vals);
    const secretFields = objects.map(() => new Set<string>());
    if (flags.some(Boolean)) {
      let changed: KubernetesObject[] | undefined;
      try {
        changed = build(vals.map((v, i) => (flags[i] ? perturb(v) : v)));
      } catch {
        changed = undefined;
      }
      objects.forEach((o, j) => {
        const other = changed?.length === objects.length ? changed[j] : undefined;
        for (const key of Object.keys(o)) {
          if (!other || !isDeepStrictEqual(o[key], other[key])) secretFields[j]?.add(key);
        }
      });
    }
    return { objects, secretFields };
  });
}

/**
 * The inputs of the `index`th resolved object: its kind as given, and one Output per field of
 * `shape` (the same object built before the values are known, for its fields).
 */
export function resolvedObject(
  resolved: pulumi.Output<ResolvedObjects>,
  index: number,
  shape: KubernetesObject,
): KubernetesObject {
  const out: Record<string, unknown> = { apiVersion: shape.apiVersion, kind: shape.kind };
  for (const key of Object.keys(shape)) {
    if (key === "apiVersion" || key === "kind") continue;
    out[key] = resolved.apply((r) => {
      const o = r.objects[index];
      if (o?.kind !== shape.kind || Object.keys(o).some((k) => !(k in shape))) {
        throw new Error(
          `Hive internal error: object ${index} (${shape.kind}) changed shape once its inputs resolved`,
        );
      }
      return r.secretFields[index]?.has(key) ? pulumi.secret(o[key]) : o[key];
    });
  }
  return out as unknown as KubernetesObject;
}
