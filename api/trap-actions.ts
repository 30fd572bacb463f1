/**
 * What a HivePolicy trap does with an access: report it (`alert`), or also have the kernel
 * refuse it (`deny`, or `dryRun` to only mark what would be refused).
 */
import type { HiveTrap } from "./trap.ts";

/**
 * What a trap does with an access: `alert` reports it; `deny` also has the kernel refuse it
 * (EACCES) in the containers the trap selects, where the node's kernel can (bpf/hive.bpf.c
 * hive_deny). `dryRun` reports what deny would refuse and refuses nothing.
 */
export const TRAP_ACTIONS = ["alert", "deny"] as const;
export type TrapAction = (typeof TRAP_ACTIONS)[number];

/** What a trap asks the kernel to do besides reporting: refuse ("deny"), mark ("dryRun"), or nothing. */
export function trapDeny(trap: Pick<HiveTrap, "action" | "dryRun">): "deny" | "dryRun" | undefined {
  if (trap.action !== "deny") return undefined;
  return trap.dryRun === true ? "dryRun" : "deny";
}

/** What the kernel does with a file several traps watch: one that denies makes it deny. */
export function strongestDeny(
  denies: ReadonlyArray<"deny" | "dryRun" | undefined>,
): "deny" | "dryRun" | undefined {
  if (denies.includes("deny")) return "deny";
  return denies.includes("dryRun") ? "dryRun" : undefined;
}

/**
 * The allow entries the kernel decides at the access (bpf/hive.h HIVE_ALLOW_ENTRIES): a denying
 * trap's whole list must be among them.
 */
export const MAX_DENY_ALLOW_ENTRIES = 32;
/** A denying trap lets through only what the kernel can decide at the access: exact paths. */
export const DENY_WITH_ALLOW = `action: deny takes allow entries that name exact paths (no \`*\`), at most ${MAX_DENY_ALLOW_ENTRIES}: the kernel decides them at the access`;
