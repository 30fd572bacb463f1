/** The `traps` option: each trap checked, then grouped into the HivePolicy its `policy` names. */
import { type HivePolicySpec, MAX_TRAPS_PER_POLICY } from "../../api/index.ts";
import { isPlainObject, toHiveTrap, trapProblems } from "../builders/traps.ts";
import { type Checker, DNS_SUBDOMAIN } from "./checker.ts";
import { DEFAULT_POLICY } from "./defaults.ts";

export function groupTraps(c: Checker, value: unknown): { name: string; spec: HivePolicySpec }[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) {
    c.add("traps", 'must be a list of traps such as [{ path: "/etc/shadow" }]');
    return [];
  }
  const groups = new Map<string, HivePolicySpec["traps"]>();
  value.forEach((trap: unknown, i) => {
    const at = `traps[${i}]`;
    const problems = trapProblems(trap, at, ["policy"]);
    const policy = isPlainObject(trap) && trap.policy !== undefined ? trap.policy : DEFAULT_POLICY;
    if (!DNS_SUBDOMAIN.test(String(policy)) || typeof policy !== "string") {
      problems.push({
        option: `${at}.policy`,
        message: `${JSON.stringify(policy)} is not a HivePolicy name (a DNS subdomain)`,
      });
    }
    c.problems.push(...problems);
    if (problems.length > 0) return;
    const list = groups.get(policy as string) ?? [];
    list.push(toHiveTrap(trap as never));
    groups.set(policy as string, list);
  });
  for (const [name, traps] of groups) {
    if (traps.length > MAX_TRAPS_PER_POLICY) {
      c.add(
        "traps",
        `policy "${name}" has ${traps.length} traps; at most ${MAX_TRAPS_PER_POLICY} fit one HivePolicy`,
      );
    }
  }
  return [...groups].map(([name, traps]) => ({ name, spec: { traps } }));
}
