/**
 * Byte layouts shared with bpf/hive.h (struct hive_key, hive_value, hive_event,
 * hive_counters, hive_proof) and the one place where device numbers are converted between stat()'s
 * st_dev encoding and the kernel's s_dev. test/kernel/layout.test.ts checks every offset
 * here against the compiled object's BTF.
 */
import type { FileChange } from "../../api/alert.ts";
import type { AccessKind } from "../../api/meta.ts";
import type {
  ExecIdentity,
  ExecProvenance,
  ExeLayer,
  FileKey,
  KernelEvent,
  LoaderEnvVar,
  WatchEntry,
} from "./contract.ts";

/** MAY_* bits of inode_permission's mask (include/linux/fs.h, mirrored in bpf/hive.h). */
const MAY = { exec: 0x01, write: 0x02, read: 0x04, append: 0x08, access: 0x10, open: 0x20 } as const;

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

const KIND_FILE = 0;
const KIND_PARENT = 1;
/** An entry the kernel armed for a file renamed over a trapped one (bpf/hive.h HIVE_KIND_FOLLOWED). */
const KIND_FOLLOWED = 2;

/** Byte offsets, sizes: struct hive_key. */
export const KEY_LAYOUT = { size: 16, ino: 0, dev: 8 } as const;
/** struct hive_value */
export const VALUE_LAYOUT = { size: 24, slot: 0, mask: 4, kind: 8, group: 12, action: 16 } as const;
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
/** struct hive_flood_key and struct hive_flood (hive_flood's keys and values). */
export const FLOOD_KEY_LAYOUT = floodKeyOffsets();
const floodKeyScratch = Buffer.alloc(FLOOD_KEY_LAYOUT.size);

/** The flood key (hex of struct hive_flood_key) of a raw hive_event: what the kernel held its burst under. */
export function floodKeyOf(event: Uint8Array): string {
  const bytes = asBuffer(event);
  floodKeyScratch.fill(0);
  for (const [name, width] of FLOOD_KEY_FIELDS)
    bytes.copy(floodKeyScratch, FLOOD_KEY_LAYOUT[name], EVENT_LAYOUT[name], EVENT_LAYOUT[name] + width);
  return floodKeyScratch.toString("hex");
}
export const FLOOD_LAYOUT = {
  size: 40,
  window_ns: 0,
  held_bursts: 8,
  held_checks: 16,
  last_ns: 24,
  emitted: 32,
} as const;
/** struct hive_proc (values of hive_procs, keyed by tgid). */
export const PROC_LAYOUT = {
  size: 320,
  start_ns: 0,
  exec_ns: 8,
  parent_start_ns: 16,
  parent_exec_ns: 24,
  exe_ino: 32,
  exe_dev: 40,
  ppid: 44,
  ns_pid: 48,
  uid: 52,
  flags: 56,
  exe: 64,
} as const;
/** HIVE_EXE_MAX, HIVE_EXE_* of bpf/hive.h. */
export const EXE_MAX = 256;
const EXE = {
  unknown: 0,
  exec: 1,
  seed: 2,
  sourceMask: 0xff,
  truncated: 0x100,
  unreachable: 0x200,
  image: 0x1000,
  written: 0x2000,
  unlinked: 0x4000,
  ldPreload: 0x10000,
  ldAudit: 0x20000,
  ldLibraryPath: 0x40000,
  envUnread: 0x80000,
  traced: 0x100000,
  forkUnseen: 0x200000,
} as const;
/** HIVE_REL_* of bpf/hive.h (hive_event.relation). */
const REL = { chroot: 0x1, parentChroot: 0x2, parentExeced: 0x4, reparented: 0x8 } as const;
/** struct hive_counters (one per CPU in hive_counters). */
export const COUNTERS_LAYOUT = {
  size: 72,
  events: 0,
  lost: 8,
  checks: 16,
  bursts: 24,
  unfolded: 32,
  held: 40,
  flood_full: 48,
  quiet: 56,
  denied: 64,
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

/**
 * stat()'s st_dev (glibc/libuv encoding: major in bits 8–19 and 32–63, minor in bits 0–7
 * and 12–31) → the major/minor pair of the device.
 */
export function fileKeyFromStat(stat: { dev: number | bigint; ino: number | bigint }): FileKey {
  const dev = BigInt(stat.dev);
  const major = Number(((dev >> 8n) & 0xfffn) | ((dev >> 32n) & ~0xfffn));
  const minor = Number((dev & 0xffn) | ((dev >> 12n) & ~0xffn & 0xffffffffn));
  return { major, minor, ino: BigInt(stat.ino) };
}

/** The kernel's internal dev_t (MKDEV: major << 20 | minor), as in super_block.s_dev. */
export function kernelDev(key: Pick<FileKey, "major" | "minor">): number {
  return ((key.major << 20) | (key.minor & 0xfffff)) >>> 0;
}

export function keyFromKernelDev(dev: number, ino: bigint): FileKey {
  return { major: dev >>> 20, minor: dev & 0xfffff, ino };
}

export function fileKeyId(key: FileKey): string {
  return `${key.major}:${key.minor}:${key.ino}`;
}

export function encodeKey(key: FileKey): Buffer {
  const buf = Buffer.alloc(KEY_LAYOUT.size);
  buf.writeBigUInt64LE(key.ino, KEY_LAYOUT.ino);
  buf.writeUInt32LE(kernelDev(key), KEY_LAYOUT.dev);
  return buf;
}

export function decodeKey(buf: Buffer): FileKey {
  return keyFromKernelDev(buf.readUInt32LE(KEY_LAYOUT.dev), buf.readBigUInt64LE(KEY_LAYOUT.ino));
}

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
  return buf;
}

export interface DecodedValue {
  slot: number;
  mask: number;
  kind: "file" | "parent";
  group: number;
  /** HIVE_ACTION_* (ACTIONS). */
  action: number;
}

export function decodeValue(buf: Buffer): DecodedValue {
  return {
    slot: buf.readUInt32LE(VALUE_LAYOUT.slot),
    mask: buf.readUInt32LE(VALUE_LAYOUT.mask),
    kind: buf.readUInt32LE(VALUE_LAYOUT.kind) === KIND_PARENT ? "parent" : "file",
    group: buf.readUInt32LE(VALUE_LAYOUT.group),
    action: buf.readUInt32LE(VALUE_LAYOUT.action),
  };
}

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

/** A NUL-terminated string of a record, decoded without copying the bytes first. */
/** A Buffer over the same bytes (no copy). */
function asBuffer(buf: Uint8Array): Buffer {
  return Buffer.isBuffer(buf) ? buf : Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
}

function cString(buf: Buffer, offset: number, size: number): string {
  // Decoded in place: no view per string (half of an event's decoding cost was views).
  const nul = buf.indexOf(0, offset);
  return buf.toString("utf8", offset, nul < 0 || nul > offset + size ? offset + size : nul);
}

/**
 * An executable path as the kernel recorded it, with where it came from. Unknown, or a path
 * the walk could not finish from the process's root, is never an exact identity.
 */
export function decodeExecIdentity(flags: number, path: string): ExecIdentity {
  const source = flags & EXE.sourceMask;
  if (source !== EXE.exec && source !== EXE.seed) return { source: "unknown" };
  const identity: ExecIdentity = { exe: path, source: source === EXE.exec ? "exec" : "seed" };
  if (flags & (EXE.truncated | EXE.unreachable)) identity.truncated = true;
  return identity;
}

/** Which file ran and what may run in it besides, from HIVE_EXE_* flags and the recorded file. */
export function decodeProvenance(flags: number, file: FileKey): ExecProvenance {
  const layer: ExeLayer =
    flags & EXE.unlinked
      ? "unlinked"
      : flags & EXE.written
        ? "container"
        : flags & EXE.image
          ? "image"
          : "other";
  const loaderEnv: LoaderEnvVar[] = [];
  if (flags & EXE.ldPreload) loaderEnv.push("LD_PRELOAD");
  if (flags & EXE.ldAudit) loaderEnv.push("LD_AUDIT");
  if (flags & EXE.ldLibraryPath) loaderEnv.push("LD_LIBRARY_PATH");
  return {
    file,
    layer,
    loaderEnv,
    envUnread: (flags & EXE.envUnread) !== 0,
    traced: (flags & EXE.traced) !== 0,
    forkUnseen: (flags & EXE.forkUnseen) !== 0,
  };
}

/** One hive_procs value: the process's executable, its parent and when it started. */
export interface DecodedProc {
  startNs: bigint;
  execNs: bigint;
  parentStartNs: bigint;
  ppid: number;
  nsPid: number;
  uid: number;
  exe: ExecIdentity;
}

export function decodeProc(buf: Uint8Array): DecodedProc {
  const view = new DataView(buf.buffer, buf.byteOffset, PROC_LAYOUT.size);
  const L = PROC_LAYOUT;
  return {
    startNs: view.getBigUint64(L.start_ns, true),
    execNs: view.getBigUint64(L.exec_ns, true),
    parentStartNs: view.getBigUint64(L.parent_start_ns, true),
    ppid: view.getUint32(L.ppid, true),
    nsPid: view.getUint32(L.ns_pid, true),
    uid: view.getUint32(L.uid, true),
    exe: decodeExecIdentity(view.getUint32(L.flags, true), cString(asBuffer(buf), L.exe, EXE_MAX)),
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
