/**
 * Arguments whose leaves may be `pulumi.Input`s (Outputs or Promises), handled without the
 * Pulumi SDK (`hive render` runs this module in the agent image, which has no SDK): find them by
 * option path, put values in their place, and tell which problems a value not known yet could
 * have caused.
 */
import type { ArgProblem } from "./builders/problems.ts";
import { isPlainObject } from "./builders/traps.ts";

/** A value known only later, at its option path (`callback.url`, `traps[1].match.ip`). */
export interface PendingInput {
  path: string;
  /** An Output (`__pulumiOutput`, as `pulumi.Output.isInstance` tests it) or a Promise. */
  value: unknown;
}

export function isPending(value: unknown): boolean {
  return (
    value !== null &&
    typeof value === "object" &&
    ((value as { __pulumiOutput?: unknown }).__pulumiOutput === true ||
      typeof (value as { then?: unknown }).then === "function")
  );
}

function childPath(path: string, key: string | number): string {
  if (typeof key === "number") return `${path}[${key}]`;
  return path === "" ? key : `${path}.${key}`;
}

/** Every Output and Promise in `value`, depth first, with its option path. */
export function findInputs(value: unknown, path = ""): PendingInput[] {
  if (isPending(value)) return [{ path, value }];
  if (Array.isArray(value)) return value.flatMap((v, i) => findInputs(v, childPath(path, i)));
  if (isPlainObject(value))
    return Object.entries(value).flatMap(([k, v]) => findInputs(v, childPath(path, k)));
  return [];
}

/**
 * A copy of `args` with the value at each pending input's path replaced by `values[i]` (RegExps and
 * other leaves are kept as they are, not copied). `undefined` stands for a value not known yet.
 */
export function withValues<T>(args: T, pending: readonly PendingInput[], values: readonly unknown[]): T {
  const byPath = new Map(pending.map((p, i) => [p.path, values[i]]));
  const copy = (value: unknown, path: string): unknown => {
    if (byPath.has(path)) return byPath.get(path);
    if (Array.isArray(value)) return value.map((v, i) => copy(v, childPath(path, i)));
    if (isPlainObject(value))
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, copy(v, childPath(path, k))]));
    return value;
  };
  return copy(args, "") as T;
}

/** Options whose checks read another option of the same object: `mode` needs `create`. */
const DEPENDENTS: Readonly<Record<string, readonly string[]>> = {
  create: ["mode"],
  operator: ["value"],
  type: ["rollingUpdate"],
};

/**
 * Where a value not known yet (standing as undefined) may cause problems: its own option and
 * what lies under it, the options that contain it (an allow entry "needs exe or parentExe"),
 * and the options of the same object whose checks read it.
 */
function isCausedBy(option: string, pendingPath: string): boolean {
  const scopes = [pendingPath];
  const field = pendingPath.match(/^(.*)\.([^.[\]]+)$/);
  if (field?.[1] !== undefined && field[2] !== undefined)
    for (const dependent of DEPENDENTS[field[2]] ?? []) scopes.push(`${field[1]}.${dependent}`);
  const under = (a: string, b: string) =>
    b === "" || a === b || a.startsWith(`${b}.`) || a.startsWith(`${b}[`);
  return scopes.some((s) => under(option, s)) || under(pendingPath, option);
}

/**
 * The problems found with pending inputs left out (undefined) that their values cannot change: the
 * ones to report before anything is created. The rest are checked again once the values are known.
 */
export function knownProblems(
  problems: readonly ArgProblem[],
  pending: readonly PendingInput[],
): ArgProblem[] {
  return problems.filter((p) => !pending.some((i) => isCausedBy(p.option, i.path)));
}

/**
 * A different value of the same shape, to find out which objects a secret input reaches: an
 * object built from `perturb(secret)` that differs from the one built from `secret` carries it.
 */
export function perturb(value: unknown): unknown {
  if (typeof value === "string") return `${value}0`;
  if (typeof value === "number") return value > 1 ? value - 1 : value + 1;
  if (typeof value === "boolean") return !value;
  if (value instanceof RegExp) return new RegExp(`${value.source}0`);
  if (Array.isArray(value)) return value.map(perturb);
  if (isPlainObject(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, perturb(v)]));
  return value;
}
