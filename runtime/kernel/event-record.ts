/**
 * struct hive_event (bpf/hive.h), the record of one burst in the ring buffer: its layout,
 * the flood key built from it, and its decoding. Part of the layouts shared with bpf/hive.h
 * (layout.ts), checked against the object's BTF. decodeEvent runs once per event on the main
 * thread: it reads in place, without copies or views per field.
 */
import { accessesFromMask, CHANGE_MASK, changeFromMask, DENY_BITS } from "./access-bits.ts";
import type { KernelEvent } from "./contract.ts";
import { asBuffer, cString, decodeExecIdentity, decodeProvenance, EXE_MAX } from "./exec-identity.ts";
import { keyFromKernelDev } from "./file-key.ts";
import { KIND_FOLLOWED, KIND_PARENT } from "./map-layouts.ts";

/** struct hive_event */
export const EVENT_LAYOUT = {
  size: 896,
  ktime_ns: 0,
  last_ns: 8,
  ino: 16,
  cgroup_id: 24,
  dev: 32,
  mask: 36,
  pid: 40,
  tgid: 44,
  uid: 48,
  gid: 52,
  slot: 56,
  count: 60,
  kind: 64,
  group: 68,
  comm: 72,
  commSize: 16,
  exec_ns: 88,
  grandparent_start_ns: 96,
  ppid: 104,
  ns_pid: 108,
  exe_flags: 112,
  parent_flags: 116,
  parent_comm: 120,
  exe: 136,
  parent_exe: 392,
  grandparent_pid: 648,
  relation: 652,
  exe_ino: 656,
  parent_exe_ino: 664,
  exe_dev: 672,
  parent_exe_dev: 676,
  root_dev: 680,
  cgroup_level: 684,
  held_bursts: 688,
  held_checks: 696,
  cgroup_name: 704,
  cgroup_parent: 800,
  cgroupNameSize: 96,
} as const;
/**
 * struct hive_flood_key, field by field with its width: each is the hive_event field of its name
 * (bpf/hive.h), so that the key of an event is built from the event (floodKeyOf), and a trailing
 * 4-byte _pad. FLOOD_KEY_LAYOUT (offsets) is derived from it.
 */
const FLOOD_KEY_FIELDS = [
  ["cgroup_id", 8],
  ["exe_ino", 8],
  ["parent_exe_ino", 8],
  ["exe_dev", 4],
  ["slot", 4],
  ["parent_exe_dev", 4],
  ["root_dev", 4],
  ["exe_flags", 4],
  ["parent_flags", 4],
  ["relation", 4],
] as const satisfies readonly (readonly [keyof typeof EVENT_LAYOUT, 4 | 8])[];
type FloodKeyField = (typeof FLOOD_KEY_FIELDS)[number][0];
const floodKeyOffsets = (): Record<FloodKeyField, number> & { size: number } => {
  let at = 0;
  const out: Record<string, number> = {};
  for (const [name, width] of FLOOD_KEY_FIELDS) {
    out[name] = at;
    at += width;
  }
  return { ...(out as Record<FloodKeyField, number>), size: at + 4 };
};
/** struct hive_flood_key (hive_flood's keys; its values: map-layouts.ts FLOOD_LAYOUT). */
export const FLOOD_KEY_LAYOUT = floodKeyOffsets();
const floodKeyScratch = Buffer.alloc(FLOOD_KEY_LAYOUT.size);

/** Each field's offsets in the event and in the key, and its width in 32-bit words. */
const FLOOD_KEY_COPIES = FLOOD_KEY_FIELDS.map(([name, width]) => ({
  from: EVENT_LAYOUT[name],
  to: FLOOD_KEY_LAYOUT[name],
  words: width / 4,
}));

/** The flood key (hex of struct hive_flood_key) of a raw hive_event: what the kernel held its burst under. */
export function floodKeyOf(event: Uint8Array): string {
  const bytes = asBuffer(event);
  // Word by word: a Buffer.copy per field cost more than the rest of an event's decoding.
  for (const { from, to, words } of FLOOD_KEY_COPIES)
    for (let w = 0; w < words; w++)
      floodKeyScratch.writeUInt32LE(bytes.readUInt32LE(from + 4 * w), to + 4 * w);
  return floodKeyScratch.toString("hex");
}
/** HIVE_REL_* of bpf/hive.h (hive_event.relation). */
const REL = { chroot: 0x1, parentChroot: 0x2, parentExeced: 0x4, reparented: 0x8 } as const;
/** What identifies a burst (thread id + first-check time) and when it was last extended. */
export interface BurstTimes {
  pid: number;
  ktimeNs: bigint;
  lastNs: bigint;
}

/** Reads only a record's burst identity and times (the sweep and deduplication need no more). */
export function decodeBurstTimes(buf: Uint8Array): BurstTimes {
  const view = new DataView(buf.buffer, buf.byteOffset, EVENT_LAYOUT.size);
  return {
    pid: view.getUint32(EVENT_LAYOUT.pid, true),
    ktimeNs: view.getBigUint64(EVENT_LAYOUT.ktime_ns, true),
    lastNs: view.getBigUint64(EVENT_LAYOUT.last_ns, true),
  };
}

export function decodeEvent(buf: Uint8Array): KernelEvent {
  if (buf.byteLength < EVENT_LAYOUT.size) {
    throw new RangeError(`kernel event of ${buf.byteLength} bytes, expected ${EVENT_LAYOUT.size}`);
  }
  const view = new DataView(buf.buffer, buf.byteOffset, EVENT_LAYOUT.size);
  const bytes = asBuffer(buf);
  const L = EVENT_LAYOUT;
  const u32 = (offset: number) => view.getUint32(offset, true);
  const rawMask = u32(L.mask);
  // The MAY_* bits alone are the access mask; the bits above name a change of the file, or a
  // denying entry's outcome.
  const mask = rawMask & ~(CHANGE_MASK | DENY_BITS.denied | DENY_BITS.dryRun);
  const deny =
    rawMask & DENY_BITS.denied ? "denied" : rawMask & DENY_BITS.dryRun ? ("dryRun" as const) : undefined;
  const change = changeFromMask(rawMask);
  const ppid = u32(L.ppid);
  const nsPid = u32(L.ns_pid);
  const relation = u32(L.relation);
  const exeFlags = u32(L.exe_flags);
  const parentFlags = u32(L.parent_flags);
  const rootDev = keyFromKernelDev(u32(L.root_dev), 0n);
  const process: KernelEvent["process"] = {
    exe: decodeExecIdentity(exeFlags, cString(bytes, L.exe, EXE_MAX)),
    provenance: decodeProvenance(
      exeFlags,
      keyFromKernelDev(u32(L.exe_dev), view.getBigUint64(L.exe_ino, true)),
    ),
    chroot: (relation & REL.chroot) !== 0,
    rootDev: { major: rootDev.major, minor: rootDev.minor },
    execNs: view.getBigUint64(L.exec_ns, true),
    ppid,
    parent: {
      pid: ppid,
      comm: cString(bytes, L.parent_comm, L.commSize),
      exe: decodeExecIdentity(parentFlags, cString(bytes, L.parent_exe, EXE_MAX)),
      provenance: decodeProvenance(
        parentFlags,
        keyFromKernelDev(u32(L.parent_exe_dev), view.getBigUint64(L.parent_exe_ino, true)),
      ),
      chroot: (relation & REL.parentChroot) !== 0,
      execedSinceFork: (relation & REL.parentExeced) !== 0,
      reparented: (relation & REL.reparented) !== 0,
    },
  };
  const grandparent = u32(L.grandparent_pid);
  if (grandparent > 0)
    process.grandparent = { pid: grandparent, startNs: view.getBigUint64(L.grandparent_start_ns, true) };
  if (nsPid > 0) process.nsPid = nsPid;
  return {
    ktimeNs: view.getBigUint64(L.ktime_ns, true),
    key: keyFromKernelDev(u32(L.dev), view.getBigUint64(L.ino, true)),
    mask,
    accesses: accessesFromMask(mask),
    ...(deny ? { deny } : {}),
    kind: u32(L.kind) === KIND_PARENT ? "parent" : "file",
    ...(u32(L.kind) === KIND_FOLLOWED ? { followed: true } : {}),
    slot: u32(L.slot),
    ...(u32(L.group) !== 0 ? { group: u32(L.group) } : {}),
    pid: u32(L.pid),
    tgid: u32(L.tgid),
    uid: u32(L.uid),
    gid: u32(L.gid),
    comm: cString(bytes, L.comm, L.commSize),
    cgroupId: view.getBigUint64(L.cgroup_id, true),
    // Written for an image layer's group only: read only there.
    ...(u32(L.group) !== 0 && bytes[L.cgroup_name] !== 0
      ? {
          cgroupNames: {
            name: cString(bytes, L.cgroup_name, L.cgroupNameSize),
            parent: cString(bytes, L.cgroup_parent, L.cgroupNameSize),
            level: u32(L.cgroup_level),
          },
        }
      : {}),
    count: u32(L.count),
    process,
    heldTotal: {
      bursts: view.getBigUint64(L.held_bursts, true),
      checks: view.getBigUint64(L.held_checks, true),
    },
    floodKey: floodKeyOf(bytes),
    ...(change ? { change } : {}),
  };
}
