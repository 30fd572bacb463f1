/**
 * Byte layouts shared with bpf/hive.h (struct hive_key, hive_value, hive_event, hive_counters,
 * hive_proof and the rest), gathered by what they describe:
 * - access-bits.ts: the bits of a mask (MAY_*, HIVE_CHANGE_*, deny outcomes) and HIVE_ACTION_*;
 * - file-key.ts: struct hive_key, and device numbers between stat()'s st_dev and the kernel's s_dev;
 * - map-layouts.ts: the other maps' keys and values;
 * - event-record.ts: struct hive_event and its flood key; event-decode.ts: its decoding;
 * - exec-identity.ts: HIVE_EXE_* and struct hive_proc.
 * test/kernel/layout.test.ts checks every offset against the compiled object's BTF.
 */
export {
  ACTIONS,
  accessesFromMask,
  CHANGE_MASK,
  changeFromMask,
  DENY_BITS,
  maskFromAccesses,
} from "./access-bits.ts";
export { decodeEvent } from "./event-decode.ts";
export {
  type BurstTimes,
  decodeBurstTimes,
  EVENT_LAYOUT,
  FLOOD_KEY_BYTES,
  FLOOD_KEY_LAYOUT,
  floodKeyHash,
  floodKeyOf,
  hasFloodKey,
} from "./event-record.ts";
export {
  type DecodedProc,
  decodeExecIdentity,
  decodeProc,
  decodeProvenance,
  EXE_MAX,
  PROC_LAYOUT,
} from "./exec-identity.ts";
export {
  decodeKey,
  encodeKey,
  fileKeyFromStat,
  fileKeyId,
  KEY_LAYOUT,
  kernelDev,
  keyFromKernelDev,
} from "./file-key.ts";
export {
  ALLOW_ANY,
  ALLOW_ENTRIES,
  ALLOW_KEY_LAYOUT,
  ALLOW_LAYOUT,
  BITMAP_MASK,
  BITMAP_WORDS,
  COUNTERS_LAYOUT,
  type DecodedValue,
  decodeAllowCounts,
  decodeProof,
  decodeQuietKey,
  decodeValue,
  encodeAllowKey,
  encodeAllowRule,
  encodeQuietKey,
  encodeValue,
  FLOOD_LAYOUT,
  PROOF_LAYOUT,
  QUIET_KEY_LAYOUT,
  VALUE_LAYOUT,
  WATCH_FLAGS,
} from "./map-layouts.ts";
