/**
 * Typed traps → the HivePolicy resource's `spec.traps[]` (api/policy.ts), and their
 * validation through api/validate.ts with messages that name the option the user wrote
 * (`traps[2].match.containerName`), not the resource field.
 */
import {
  type AllowEntry,
  formatMode,
  type HiveTrap,
  type TrapMatch,
  validatePolicySpec,
} from "../../api/index.ts";
import type { TrapValues } from "../args.ts";
import type { ArgProblem } from "./problems.ts";

export const TRAP_KEYS = [
  "path",
  "create",
  "mode",
  "callback",
  "accesses",
  "changes",
  "match",
  "allow",
  "severity",
  "labels",
  "action",
  "dryRun",
] as const;
export const MATCH_KEYS = ["pod", "namespace", "ip", "containerName", "matchLabels"] as const;
export const ALLOW_KEYS = ["exe", "parentExe", "accesses"] as const;

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value) && !(value instanceof RegExp);
}

export function unknownKeys(value: object, known: readonly string[], at: string): ArgProblem[] {
  return Object.keys(value)
    .filter((key) => !known.includes(key))
    .map((key) => ({
      option: at ? `${at}.${key}` : key,
      message: `is not a known option (known: ${known.join(", ")})`,
    }));
}

/** Resource field → typed option, where they differ. */
const OPTION_NAMES: Record<string, string> = { "container-name": "containerName", "parent-exe": "parentExe" };

function containerNamePattern(value: RegExp | string): string {
  return value instanceof RegExp ? value.source : value;
}

/**
 * One trap as the resource spells it. Absent options stay absent (no `undefined` keys), so
 * the object is the same whether it is applied by Pulumi or printed as YAML.
 */
export function toHiveTrap(trap: TrapValues): HiveTrap {
  const out: HiveTrap = { path: trap.path };
  if (trap.create !== undefined) out.create = trap.create;
  if (trap.mode !== undefined) out.mode = typeof trap.mode === "number" ? formatMode(trap.mode) : trap.mode;
  if (trap.callback !== undefined) out.callback = trap.callback;
  if (trap.accesses !== undefined) out.accesses = [...trap.accesses];
  if (trap.changes !== undefined) out.changes = trap.changes;
  if (trap.match !== undefined) {
    const m = trap.match;
    const match: TrapMatch = {};
    if (m.pod !== undefined) match.pod = m.pod;
    if (m.namespace !== undefined) match.namespace = m.namespace;
    if (m.ip !== undefined) match.ip = m.ip;
    if (m.containerName !== undefined) match["container-name"] = containerNamePattern(m.containerName);
    if (m.matchLabels !== undefined) match.matchLabels = { ...m.matchLabels };
    out.match = match;
  }
  if (trap.allow !== undefined) {
    out.allow = trap.allow.map((a) => {
      const entry: AllowEntry = {};
      if (a.exe !== undefined) entry.exe = a.exe;
      if (a.parentExe !== undefined) entry["parent-exe"] = a.parentExe;
      if (a.accesses !== undefined) entry.accesses = [...a.accesses];
      return entry;
    });
  }
  if (trap.severity !== undefined) out.severity = trap.severity;
  if (trap.labels !== undefined) out.labels = { ...trap.labels };
  if (trap.action !== undefined) out.action = trap.action;
  if (trap.dryRun !== undefined) out.dryRun = trap.dryRun;
  return out;
}

/** Problems of one typed trap, named as `<at>.<option>`; empty when the trap is valid. */
export function trapProblems(trap: unknown, at: string, extraKeys: readonly string[] = []): ArgProblem[] {
  if (!isPlainObject(trap)) {
    return [{ option: at, message: 'must be an object such as { path: "/etc/shadow" }' }];
  }
  const t = trap as TrapValues & Record<string, unknown>;
  // Unknown keys would be dropped by the conversion below; name them instead (typos such as `crate`).
  const problems: ArgProblem[] = unknownKeys(t, [...TRAP_KEYS, ...extraKeys], at);
  if (t.match !== undefined) {
    if (!isPlainObject(t.match))
      return [...problems, { option: `${at}.match`, message: "must be an object" }];
    problems.push(...unknownKeys(t.match, MATCH_KEYS, `${at}.match`));
  }
  if (t.labels !== undefined && !isPlainObject(t.labels))
    return [
      ...problems,
      { option: `${at}.labels`, message: 'must map label names to values, e.g. { team: "payments" }' },
    ];
  if (t.allow !== undefined) {
    if (!Array.isArray(t.allow) || !t.allow.every(isPlainObject)) {
      return [
        ...problems,
        { option: `${at}.allow`, message: 'must be a list such as [{ exe: "/usr/sbin/sshd" }]' },
      ];
    }
    // `parent-exe` (the resource's spelling) is named as an unknown option: the typed one is parentExe.
    t.allow.forEach((entry, i) => {
      problems.push(...unknownKeys(entry, ALLOW_KEYS, `${at}.allow[${i}]`));
    });
  }
  // Checks the typed surface has and the resource cannot see (it only gets the converted value).
  const containerName = t.match?.containerName;
  if (containerName instanceof RegExp && containerName.flags.replace(/[gy]/g, "") !== "") {
    problems.push({
      option: `${at}.match.containerName`,
      message: `RegExp flags "${containerName.flags}" are not supported; write the pattern without flags (e.g. /[Nn]ginx/ instead of /nginx/i)`,
    });
  }
  if (typeof t.mode === "number" && (!Number.isInteger(t.mode) || t.mode < 0 || t.mode > 0o7777)) {
    problems.push({
      option: `${at}.mode`,
      message: `${t.mode} is not permission bits; write an octal literal such as 0o444 or a string such as "0444"`,
    });
    return problems;
  }
  let converted: HiveTrap;
  try {
    converted = toHiveTrap(t);
  } catch (error) {
    return [...problems, { option: at, message: (error as Error).message }];
  }
  const result = validatePolicySpec({ traps: [converted] }, "");
  if (!result.ok) {
    for (const e of result.errors) {
      // "traps[0].match.container-name" → "<at>.match.containerName"
      const rest = e.field.replace(/^traps\[0\]/, "");
      const option = `${at}${rest}`.replace(/[\w-]+$/, (last) => OPTION_NAMES[last] ?? last);
      if (problems.some((p) => p.option === option)) continue;
      // The resource's field names inside messages, as the typed options spell them.
      problems.push({ option, message: e.message.replace(/\bparent-exe\b/g, "parentExe") });
    }
  }
  return problems;
}
