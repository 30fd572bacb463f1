/**
 * The bits of a mask (bpf/hive.h): the MAY_* access bits of inode_permission, and above them
 * the HIVE_CHANGE_* and deny-outcome bits; and HIVE_ACTION_*. Part of the layouts shared with
 * bpf/hive.h (layout.ts).
 */
import type { FileChange } from "../../api/alert.ts";
import type { AccessKind } from "../../api/meta.ts";

/** MAY_* bits of inode_permission's mask (include/linux/fs.h, mirrored in bpf/hive.h). */
export const MAY = { exec: 0x01, write: 0x02, read: 0x04, append: 0x08, access: 0x10, open: 0x20 } as const;

const ACCESS_BITS: ReadonlyArray<readonly [AccessKind, number]> = [
  ["read", MAY.read],
  ["write", MAY.write],
  ["exec", MAY.exec],
  ["append", MAY.append],
  ["open", MAY.open],
];

export function maskFromAccesses(accesses: readonly AccessKind[]): number {
  let mask = 0;
  for (const [kind, bit] of ACCESS_BITS) if (accesses.includes(kind)) mask |= bit;
  return mask;
}

export function accessesFromMask(mask: number): AccessKind[] {
  return ACCESS_BITS.filter(([, bit]) => (mask & bit) !== 0).map(([kind]) => kind);
}

/**
 * HIVE_CHANGE_* (bpf/hive.h): changes of the file, above the MAY_* bits of a mask. Listed most
 * telling first: a burst that saw several is named by the first (a truncate then a delete is a
 * deletion).
 */
const CHANGE_BITS: ReadonlyArray<readonly [FileChange, number]> = [
  ["deleted", 0x10000],
  ["replaced", 0x40000],
  ["renamed", 0x20000],
  ["truncated", 0x80000],
];
/** Every change bit: what a watch entry wants when its trap reports changes. */
export const CHANGE_MASK = 0xf0000;

/** HIVE_DENIED, HIVE_DENY_DRY_RUN (bpf/hive.h): a denying entry's outcome, above the change bits. */
export const DENY_BITS = { denied: 0x100000, dryRun: 0x200000 } as const;
/** HIVE_ACTION_* (bpf/hive.h hive_value.action). */
export const ACTIONS = { alert: 0, deny: 1, dryRun: 2 } as const;

/** The change a mask names, if any (changeFromMask(0x40000) === "replaced"). */
export function changeFromMask(mask: number): FileChange | undefined {
  return CHANGE_BITS.find(([, bit]) => (mask & bit) !== 0)?.[0];
}
