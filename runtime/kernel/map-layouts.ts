/**
 * The keys and values of the maps shared with bpf/hive.bpf.c: struct hive_value (hive_watch),
 * hive_flood, hive_counters, hive_quiet_key, hive_proof, and the pre-filter bitmap's geometry.
 * Part of the layouts shared with bpf/hive.h (layout.ts), checked against the object's BTF.
 */
import { ACTIONS, CHANGE_MASK, MAY, maskFromAccesses } from "./access-bits.ts";
import type { AllowRule, FileKey, WatchEntry } from "./contract.ts";
import { decodeKey, KEY_LAYOUT, kernelDev } from "./file-key.ts";

/** HIVE_KIND_* (bpf/hive.h hive_value.kind, hive_event.kind). */
export const KIND_FILE = 0;
export const KIND_PARENT = 1;
/** An entry the kernel armed for a file renamed over a trapped one (bpf/hive.h HIVE_KIND_FOLLOWED). */
export const KIND_FOLLOWED = 2;

/** struct hive_value */
export const VALUE_LAYOUT = {
  size: 24,
  slot: 0,
  mask: 4,
  kind: 8,
  group: 12,
  action: 16,
  flags: 20,
} as const;
/** HIVE_WATCH_* (bpf/hive.h hive_value.flags): the kernel decides allow entries of this slot's trap. */
export const WATCH_FLAGS = { allow: 0x1, allowParent: 0x2 } as const;
/** The kernel mask a watch entry wants: its access kinds, or entry changes for a parent. */
function entryMask(entry: WatchEntry): number {
  if (entry.kind === "parent") return MAY.write;
  return maskFromAccesses(entry.accesses) | (entry.changes ? CHANGE_MASK : 0);
}

export function encodeValue(entry: WatchEntry): Buffer {
  const buf = Buffer.alloc(VALUE_LAYOUT.size);
  buf.writeUInt32LE(entry.slot >>> 0, VALUE_LAYOUT.slot);
  buf.writeUInt32LE(entryMask(entry), VALUE_LAYOUT.mask);
  buf.writeUInt32LE(entry.kind === "parent" ? KIND_PARENT : KIND_FILE, VALUE_LAYOUT.kind);
  buf.writeUInt32LE((entry.group ?? 0) >>> 0, VALUE_LAYOUT.group);
  const action = entry.kind === "file" && entry.deny ? ACTIONS[entry.deny] : ACTIONS.alert;
  buf.writeUInt32LE(action, VALUE_LAYOUT.action);
  const allow = entry.allow;
  const flags = allow ? WATCH_FLAGS.allow | (allow.parent ? WATCH_FLAGS.allowParent : 0) : 0;
  buf.writeUInt32LE(flags, VALUE_LAYOUT.flags);
  return buf;
}

export interface DecodedValue {
  slot: number;
  mask: number;
  kind: "file" | "parent";
  group: number;
  /** HIVE_ACTION_* (ACTIONS). */
  action: number;
  /** HIVE_WATCH_* (WATCH_FLAGS). */
  flags: number;
}

export function decodeValue(buf: Buffer): DecodedValue {
  return {
    slot: buf.readUInt32LE(VALUE_LAYOUT.slot),
    mask: buf.readUInt32LE(VALUE_LAYOUT.mask),
    kind: buf.readUInt32LE(VALUE_LAYOUT.kind) === KIND_PARENT ? "parent" : "file",
    group: buf.readUInt32LE(VALUE_LAYOUT.group),
    action: buf.readUInt32LE(VALUE_LAYOUT.action),
    flags: buf.readUInt32LE(VALUE_LAYOUT.flags),
  };
}

/** struct hive_flood (hive_flood's values; its keys: event-record.ts FLOOD_KEY_LAYOUT). */
export const FLOOD_LAYOUT = {
  size: 40,
  window_ns: 0,
  held_bursts: 8,
  held_checks: 16,
  last_ns: 24,
  emitted: 32,
} as const;
/** struct hive_counters (one per CPU in hive_counters). */
export const COUNTERS_LAYOUT = {
  size: 80,
  events: 0,
  lost: 8,
  checks: 16,
  bursts: 24,
  unfolded: 32,
  held: 40,
  flood_full: 48,
  quiet: 56,
  denied: 64,
  allowed: 72,
} as const;

/** struct hive_quiet_key (hive_quiet's keys; the value is one byte). */
export const QUIET_KEY_LAYOUT = { size: 16, cgroup_id: 0, group: 8 } as const;

export function encodeQuietKey(cgroupId: bigint, group: number): Buffer {
  const buf = Buffer.alloc(QUIET_KEY_LAYOUT.size);
  buf.writeBigUInt64LE(cgroupId, QUIET_KEY_LAYOUT.cgroup_id);
  buf.writeUInt32LE(group >>> 0, QUIET_KEY_LAYOUT.group);
  return buf;
}

export function decodeQuietKey(buf: Buffer): { cgroupId: bigint; group: number } {
  return {
    cgroupId: buf.readBigUInt64LE(QUIET_KEY_LAYOUT.cgroup_id),
    group: buf.readUInt32LE(QUIET_KEY_LAYOUT.group),
  };
}

/** struct hive_proof (values of hive_proofs, keyed by thread id); `ids` holds HIVE_PROOF_IDS hive_keys. */
export const PROOF_LAYOUT = { size: 72, count: 0, ids: 8, idsCount: 4 } as const;

/** The identities a proof recorded, in the order the kernel checked them (at most PROOF_LAYOUT.idsCount). */
export function decodeProof(buf: Buffer): { count: number; ids: FileKey[] } {
  const count = buf.readUInt32LE(PROOF_LAYOUT.count);
  const ids: FileKey[] = [];
  for (let i = 0; i < Math.min(count, PROOF_LAYOUT.idsCount); i++) {
    const at = PROOF_LAYOUT.ids + i * KEY_LAYOUT.size;
    ids.push(decodeKey(buf.subarray(at, at + KEY_LAYOUT.size)));
  }
  return { count, ids };
}

/** Pre-filter bitmap geometry (HIVE_BITMAP_WORDS in bpf/hive.h). */
export const BITMAP_WORDS = 1024;
export const BITMAP_MASK = BigInt(BITMAP_WORDS * 64 - 1);

/** HIVE_ALLOW_ENTRIES, HIVE_ALLOW_ANY (bpf/hive.h): the allow entries the kernel decides, and "every kind". */
export const ALLOW_ENTRIES = 32;
export const ALLOW_ANY = 0xffffffff;
/** struct hive_allow_key (hive_allow's keys). */
export const ALLOW_KEY_LAYOUT = { size: 16, ino: 0, dev: 8, slot: 12 } as const;
/** struct hive_allow (hive_allow's values): the rule's words, then the kernel's counts. */
export const ALLOW_LAYOUT = {
  size: 408,
  exe: 0,
  parent: 4,
  needs_exe: 8,
  needs_parent: 12,
  decided: 16,
  host: 20,
  kinds: 24,
  allowed: 152,
} as const;

export function encodeAllowKey(slot: number, file: FileKey): Buffer {
  const buf = Buffer.alloc(ALLOW_KEY_LAYOUT.size);
  buf.writeBigUInt64LE(file.ino, ALLOW_KEY_LAYOUT.ino);
  buf.writeUInt32LE(kernelDev(file), ALLOW_KEY_LAYOUT.dev);
  buf.writeUInt32LE(slot >>> 0, ALLOW_KEY_LAYOUT.slot);
  return buf;
}

/** The rule's part of a struct hive_allow (up to `allowed`), counts left zero. */
export function encodeAllowRule(rule: AllowRule): Buffer {
  const buf = Buffer.alloc(ALLOW_LAYOUT.size);
  const L = ALLOW_LAYOUT;
  buf.writeUInt32LE(rule.exe >>> 0, L.exe);
  buf.writeUInt32LE(rule.parent >>> 0, L.parent);
  buf.writeUInt32LE(rule.needsExe >>> 0, L.needs_exe);
  buf.writeUInt32LE(rule.needsParent >>> 0, L.needs_parent);
  buf.writeUInt32LE(rule.decided >>> 0, L.decided);
  buf.writeUInt32LE(rule.host ? 1 : 0, L.host);
  for (let i = 0; i < ALLOW_ENTRIES; i++) buf.writeUInt32LE((rule.kinds[i] ?? 0) >>> 0, L.kinds + 4 * i);
  return buf;
}

/** The counts of a struct hive_allow: checks each entry allowed through its key. */
export function decodeAllowCounts(value: Buffer): bigint[] {
  return Array.from({ length: ALLOW_ENTRIES }, (_, i) => value.readBigUInt64LE(ALLOW_LAYOUT.allowed + 8 * i));
}
