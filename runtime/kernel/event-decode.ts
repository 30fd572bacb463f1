/**
 * A hive_event record (event-record.ts) as a KernelEvent, read on demand. decodeEvent runs
 * once per event on the main thread, and most events are routed, counted or dropped on their
 * numbers alone: those are read at once; the strings, the process's identity and ancestry, the
 * cgroup's names and the held counts only when something reads them (an alert, an allow
 * match).
 */
import type { FileChange } from "../../api/alert.ts";
import type { AccessKind } from "../../api/meta.ts";
import { accessesFromMask, CHANGE_MASK, changeFromMask, DENY_BITS } from "./access-bits.ts";
import type {
  CgroupNames,
  ExecIdentity,
  ExecProvenance,
  FileKey,
  KernelEvent,
  ProcessIdentity,
} from "./contract.ts";
import { floodKeyOf, EVENT_LAYOUT as L } from "./event-record.ts";
import { cString, decodeExecIdentity, decodeProvenance, EXE_MAX } from "./exec-identity.ts";
import { keyFromKernelDev } from "./file-key.ts";
import { KIND_FOLLOWED, KIND_PARENT } from "./map-layouts.ts";

/** HIVE_REL_* of bpf/hive.h (hive_event.relation). */
const REL = { chroot: 0x1, parentChroot: 0x2, parentExeced: 0x4, reparented: 0x8 } as const;
const NO_DENY = 0;

/** A DataView of the pool slab the last events were copied to (one per slab, not per event). */
let slabView: DataView<ArrayBufferLike> = new DataView(new ArrayBuffer(0));

/** The 64-bit field at `offset` of a record in `bytes`, read by V8's own DataView (no BigInt arithmetic). */
function u64(bytes: Buffer, offset: number): bigint {
  if (slabView.buffer !== bytes.buffer) slabView = new DataView(bytes.buffer);
  return slabView.getBigUint64(bytes.byteOffset + offset, true);
}

export function decodeEvent(buf: Uint8Array): KernelEvent {
  if (buf.byteLength < L.size) {
    throw new RangeError(`kernel event of ${buf.byteLength} bytes, expected ${L.size}`);
  }
  // A copy of its own, from Node's shared pool (no allocation of its own): an event kept for
  // later (a flood's last event, one waiting for its container's name) then keeps 896 bytes
  // alive, never the whole batch it came in.
  const own = Buffer.allocUnsafe(L.size);
  own.set(buf.byteLength === L.size ? buf : buf.subarray(0, L.size));
  return new RecordEvent(own);
}

/** Every field of `event` as a plain object: a copy to change, or to print (JSON.stringify). */
export function eventFields(event: KernelEvent): KernelEvent {
  const fields: KernelEvent = {
    ktimeNs: event.ktimeNs,
    key: event.key,
    mask: event.mask,
    accesses: event.accesses,
    kind: event.kind,
    slot: event.slot,
    pid: event.pid,
    tgid: event.tgid,
    uid: event.uid,
    gid: event.gid,
    comm: event.comm,
    cgroupId: event.cgroupId,
    count: event.count,
    process: event.process,
  };
  const optional = {
    change: event.change,
    deny: event.deny,
    followed: event.followed,
    group: event.group,
    cgroupNames: event.cgroupNames,
    heldTotal: event.heldTotal,
    floodKey: event.floodKey,
    summarized: event.summarized,
  };
  for (const [name, value] of Object.entries(optional))
    if (value !== undefined) Object.assign(fields, { [name]: value });
  return fields;
}

class RecordEvent implements KernelEvent {
  readonly ktimeNs: bigint;
  readonly key: FileKey;
  readonly mask: number;
  readonly kind: "file" | "parent";
  readonly slot: number;
  readonly pid: number;
  readonly tgid: number;
  readonly uid: number;
  readonly gid: number;
  readonly cgroupId: bigint;
  readonly count: number;
  // The optional fields are always present, undefined when the record has none: one shape for
  // every event keeps the readers' property accesses monomorphic.
  readonly group: number | undefined;
  readonly followed: true | undefined;
  readonly deny: "denied" | "dryRun" | undefined;
  readonly change: FileChange | undefined;
  summarized: { bursts: number; checks: number } | undefined = undefined;
  readonly #bytes: Buffer;
  #accesses: AccessKind[] | undefined;
  #process: ProcessIdentity | undefined;
  #comm: string | undefined;
  #floodKey: string | undefined;

  constructor(bytes: Buffer) {
    this.#bytes = bytes;
    const rawMask = bytes.readUInt32LE(L.mask);
    // The MAY_* bits alone are the access mask; the bits above name a change of the file, or a
    // denying entry's outcome.
    this.mask = rawMask & ~(CHANGE_MASK | DENY_BITS.denied | DENY_BITS.dryRun);
    const deny = rawMask & (DENY_BITS.denied | DENY_BITS.dryRun);
    this.deny = deny === NO_DENY ? undefined : deny & DENY_BITS.denied ? "denied" : "dryRun";
    this.change = rawMask & CHANGE_MASK ? changeFromMask(rawMask) : undefined;
    this.ktimeNs = u64(bytes, L.ktime_ns);
    this.key = keyFromKernelDev(bytes.readUInt32LE(L.dev), u64(bytes, L.ino));
    const kind = bytes.readUInt32LE(L.kind);
    this.kind = kind === KIND_PARENT ? "parent" : "file";
    this.followed = kind === KIND_FOLLOWED ? true : undefined;
    this.slot = bytes.readUInt32LE(L.slot);
    const group = bytes.readUInt32LE(L.group);
    this.group = group !== 0 ? group : undefined;
    this.pid = bytes.readUInt32LE(L.pid);
    this.tgid = bytes.readUInt32LE(L.tgid);
    this.uid = bytes.readUInt32LE(L.uid);
    this.gid = bytes.readUInt32LE(L.gid);
    this.cgroupId = u64(bytes, L.cgroup_id);
    this.count = bytes.readUInt32LE(L.count);
  }

  get accesses(): AccessKind[] {
    this.#accesses ??= accessesFromMask(this.mask);
    return this.#accesses;
  }

  get comm(): string {
    this.#comm ??= cString(this.#bytes, L.comm, L.commSize);
    return this.#comm;
  }

  get process(): ProcessIdentity {
    this.#process ??= new RecordProcess(this.#bytes);
    return this.#process;
  }

  /** Written for an image layer's group only: read only there. */
  get cgroupNames(): CgroupNames | undefined {
    const bytes = this.#bytes;
    if (this.group === undefined || bytes[L.cgroup_name] === 0) return undefined;
    return {
      name: cString(bytes, L.cgroup_name, L.cgroupNameSize),
      parent: cString(bytes, L.cgroup_parent, L.cgroupNameSize),
      level: bytes.readUInt32LE(L.cgroup_level),
    };
  }

  get heldTotal(): { bursts: bigint; checks: bigint } {
    return {
      bursts: u64(this.#bytes, L.held_bursts),
      checks: u64(this.#bytes, L.held_checks),
    };
  }

  get floodKey(): string {
    this.#floodKey ??= floodKeyOf(this.#bytes);
    return this.#floodKey;
  }

  toJSON(): KernelEvent {
    return eventFields(this);
  }
}

/** The process of a record: its own executable at once, its parent (two more strings) when read. */
class RecordProcess implements ProcessIdentity {
  readonly exe: ExecIdentity;
  readonly provenance: ExecProvenance;
  readonly chroot: boolean;
  readonly rootDev: { major: number; minor: number };
  readonly execNs: bigint;
  readonly ppid: number;
  readonly nsPid: number | undefined;
  readonly grandparent: { pid: number; startNs: bigint } | undefined;
  readonly #bytes: Buffer;
  #parent: ProcessIdentity["parent"];

  constructor(bytes: Buffer) {
    this.#bytes = bytes;
    const exeFlags = bytes.readUInt32LE(L.exe_flags);
    this.exe = decodeExecIdentity(exeFlags, cString(bytes, L.exe, EXE_MAX));
    this.provenance = decodeProvenance(
      exeFlags,
      keyFromKernelDev(bytes.readUInt32LE(L.exe_dev), u64(bytes, L.exe_ino)),
    );
    this.chroot = (bytes.readUInt32LE(L.relation) & REL.chroot) !== 0;
    const rootDev = bytes.readUInt32LE(L.root_dev);
    this.rootDev = { major: rootDev >>> 20, minor: rootDev & 0xfffff };
    this.execNs = u64(bytes, L.exec_ns);
    this.ppid = bytes.readUInt32LE(L.ppid);
    const nsPid = bytes.readUInt32LE(L.ns_pid);
    this.nsPid = nsPid > 0 ? nsPid : undefined;
    const grandparent = bytes.readUInt32LE(L.grandparent_pid);
    this.grandparent =
      grandparent > 0 ? { pid: grandparent, startNs: u64(bytes, L.grandparent_start_ns) } : undefined;
  }

  get parent(): ProcessIdentity["parent"] {
    this.#parent ??= decodeParent(this.#bytes, this.ppid);
    return this.#parent;
  }

  toJSON(): ProcessIdentity {
    const { exe, provenance, chroot, rootDev, execNs, ppid, nsPid, grandparent, parent } = this;
    return {
      exe,
      provenance,
      chroot,
      rootDev,
      execNs,
      ppid,
      parent,
      ...(nsPid !== undefined ? { nsPid } : {}),
      ...(grandparent !== undefined ? { grandparent } : {}),
    };
  }
}

function decodeParent(bytes: Buffer, ppid: number): ProcessIdentity["parent"] {
  const relation = bytes.readUInt32LE(L.relation);
  const flags = bytes.readUInt32LE(L.parent_flags);
  return {
    pid: ppid,
    comm: cString(bytes, L.parent_comm, L.commSize),
    exe: decodeExecIdentity(flags, cString(bytes, L.parent_exe, EXE_MAX)),
    provenance: decodeProvenance(
      flags,
      keyFromKernelDev(bytes.readUInt32LE(L.parent_exe_dev), u64(bytes, L.parent_exe_ino)),
    ),
    chroot: (relation & REL.parentChroot) !== 0,
    execedSinceFork: (relation & REL.parentExeced) !== 0,
    reparented: (relation & REL.reparented) !== 0,
  };
}
