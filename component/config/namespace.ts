/** The `namespace` option: a namespace to create, or `{ existing }` to use one. */
import type { HiveMonitorValues } from "../args.ts";
import { isPlainObject, unknownKeys } from "../builders/traps.ts";
import { type Checker, DNS_LABEL } from "./checker.ts";
import { DEFAULT_NAMESPACE } from "./defaults.ts";

export function checkNamespace(
  c: Checker,
  value: HiveMonitorValues["namespace"],
): { name: string; create: boolean } {
  if (value === undefined) return { name: DEFAULT_NAMESPACE, create: true };
  if (typeof value === "string") {
    c.name("namespace", value, DNS_LABEL, "a namespace name (lowercase letters, digits and '-', at most 63)");
    return { name: value, create: true };
  }
  // An `existing` not known yet is undefined here: named by its own option, not as a wrong form.
  if (isPlainObject(value) && Object.hasOwn(value, "existing")) {
    c.problems.push(...unknownKeys(value, ["existing"], "namespace"));
    c.name("namespace.existing", value.existing, DNS_LABEL, "a namespace name");
    return { name: value.existing, create: false };
  }
  c.add(
    "namespace",
    'must be a name to create ("hive-system") or { existing: "name" } to use one that exists',
  );
  return { name: DEFAULT_NAMESPACE, create: true };
}
