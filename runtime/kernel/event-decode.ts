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
import { EVENT_LAYOUT as L, type RecordBatch, recordBatch } from "./event-record.ts";
import { cString, decodeExecIdentity, decodeProvenance, EXE_MAX } from "./exec-identity.ts";
import { keyFromKernelDev } from "./file-key.ts";
import { KIND_FOLLOWED, KIND_PARENT } from "./map-layouts.ts";

/** HIVE_REL_* of bpf/hive.h (hive_event.relation). */
const REL = { chroot: 0x1, parentChroot: 0x2, parentExeced: 0x4, reparented: 0x8 } as const;
const NO_DENY = 0;

/** A record of its own: an event kept for later keeps 896 bytes alive, never what it came in. */
export function decodeEvent(buf: Uint8Array): KernelEvent {
  if (buf.byteLength < L.size) {
    throw new RangeError(`kernel event of ${buf.byteLength} bytes, expected ${L.size}`);
  }
  const own = Buffer.allocUnsafe(L.size);
  own.set(buf.byteLength === L.size ? buf : buf.subarray(0, L.size));
  return new RecordEvent(recordBatch(own), 0);
}

/**
 * The event of the record at `at` in a batch, read in place: no copy, no allocation but the
 * event's own object. The event keeps the batch alive: whatever keeps events beyond their
 * handling (held events, parked events) keeps `retainedEvent(event)` instead.
 */
export function eventAt(batch: RecordBatch, at: number): KernelEvent {
  if (at < 0 || at + L.size > batch.bytes.byteLength) {
    throw new RangeError(`kernel event at ${at} of a batch of ${batch.bytes.byteLength} bytes`);
  }
  return new RecordEvent(batch, at);
}

/** `event` with a record of its own (when it is read in place from a batch): for keeping it. */
export function retainedEvent(event: KernelEvent): KernelEvent {
  if (!(event instanceof RecordEvent) || !event.sharesBatch()) return event;
  const kept = decodeEvent(event.recordBytes());
  kept.summarized = event.summarized;
  return kept;
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
    summarized: event.summarized,
  };
  for (const [name, value] of Object.entries(optional))
    if (value !== undefined) Object.assign(fields, { [name]: value });
  return fields;
}

class RecordEvent implements KernelEvent {
  readonly mask: number;
  readonly kind: "file" | "parent";
  readonly slot: number;
  readonly pid: number;
  readonly tgid: number;
  readonly uid: number;
  readonly gid: number;
  readonly count: number;
  // The optional fields are always present, undefined when the record has none: one shape for
  // every event keeps the readers' property accesses monomorphic.
  readonly group: number | undefined;
  readonly followed: true | undefined;
  readonly deny: "denied" | "dryRun" | undefined;
  readonly change: FileChange | undefined;
  summarized: { bursts: number; checks: number } | undefined = undefined;
  /** The record is the batch's from `#at`. */
  readonly #batch: RecordBatch;
  readonly #at: number;
  #ktimeNs: bigint | undefined;
  #key: FileKey | undefined;
  #cgroupId: bigint | undefined;
  #accesses: AccessKind[] | undefined;
  #process: ProcessIdentity | undefined;
  #comm: string | undefined;

  constructor(batch: RecordBatch, at: number) {
    this.#batch = batch;
    this.#at = at;
    const view = batch.view;
    const rawMask = view.getUint32(at + L.mask, true);
    // The MAY_* bits alone are the access mask; the bits above name a change of the file, or a
    // denying entry's outcome.
    this.mask = rawMask & ~(CHANGE_MASK | DENY_BITS.denied | DENY_BITS.dryRun);
    const deny = rawMask & (DENY_BITS.denied | DENY_BITS.dryRun);
    this.deny = deny === NO_DENY ? undefined : deny & DENY_BITS.denied ? "denied" : "dryRun";
    this.change = rawMask & CHANGE_MASK ? changeFromMask(rawMask) : undefined;
    const kind = view.getUint32(at + L.kind, true);
    this.kind = kind === KIND_PARENT ? "parent" : "file";
    this.followed = kind === KIND_FOLLOWED ? true : undefined;
    this.slot = view.getUint32(at + L.slot, true);
    const group = view.getUint32(at + L.group, true);
    this.group = group !== 0 ? group : undefined;
    this.pid = view.getUint32(at + L.pid, true);
    this.tgid = view.getUint32(at + L.tgid, true);
    this.uid = view.getUint32(at + L.uid, true);
    this.gid = view.getUint32(at + L.gid, true);
    this.count = view.getUint32(at + L.count, true);
  }

  // Read when something asks: an allowed event is decided without them.
  get ktimeNs(): bigint {
    this.#ktimeNs ??= this.#batch.view.getBigUint64(this.#at + L.ktime_ns, true);
    return this.#ktimeNs;
  }

  get key(): FileKey {
    this.#key ??= keyFromKernelDev(
      this.#batch.view.getUint32(this.#at + L.dev, true),
      this.#batch.view.getBigUint64(this.#at + L.ino, true),
    );
    return this.#key;
  }

  get cgroupId(): bigint {
    this.#cgroupId ??= this.#batch.view.getBigUint64(this.#at + L.cgroup_id, true);
    return this.#cgroupId;
  }

  /** The record's own bytes (a view: copy what is kept). */
  recordBytes(): Buffer {
    return this.#batch.bytes.subarray(this.#at, this.#at + L.size);
  }

  /**
   * True when the batch holds more than this record's bytes: other records, or ring records a
   * batch of one carries unreferenced (duplicates). Kept as it is, the event would keep them too.
   */
  sharesBatch(): boolean {
    return this.#batch.bytes.byteLength > L.size;
  }

  get accesses(): AccessKind[] {
    this.#accesses ??= accessesFromMask(this.mask);
    return this.#accesses;
  }

  get comm(): string {
    this.#comm ??= cString(this.#batch.bytes, this.#at + L.comm, L.commSize);
    return this.#comm;
  }

  get process(): ProcessIdentity {
    this.#process ??= new RecordProcess(this.#batch, this.#at);
    return this.#process;
  }

  /** Written for an image layer's group only: read only there. */
  get cgroupNames(): CgroupNames | undefined {
    const { bytes, view } = this.#batch;
    const at = this.#at;
    if (this.group === undefined || bytes[at + L.cgroup_name] === 0) return undefined;
    return {
      name: cString(bytes, at + L.cgroup_name, L.cgroupNameSize),
      parent: cString(bytes, at + L.cgroup_parent, L.cgroupNameSize),
      level: view.getUint32(at + L.cgroup_level, true),
    };
  }

  get heldTotal(): { bursts: bigint; checks: bigint } {
    return {
      bursts: this.#batch.view.getBigUint64(this.#at + L.held_bursts, true),
      checks: this.#batch.view.getBigUint64(this.#at + L.held_checks, true),
    };
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
  readonly ppid: number;
  readonly nsPid: number | undefined;
  readonly #batch: RecordBatch;
  readonly #at: number;
  #parent: ProcessIdentity["parent"];

  constructor(batch: RecordBatch, at: number) {
    this.#batch = batch;
    this.#at = at;
    const { bytes, view } = batch;
    const exeFlags = view.getUint32(at + L.exe_flags, true);
    this.exe = decodeExecIdentity(exeFlags, cString(bytes, at + L.exe, EXE_MAX));
    this.provenance = decodeProvenance(
      exeFlags,
      keyFromKernelDev(view.getUint32(at + L.exe_dev, true), view.getBigUint64(at + L.exe_ino, true)),
    );
    this.chroot = (view.getUint32(at + L.relation, true) & REL.chroot) !== 0;
    this.ppid = view.getUint32(at + L.ppid, true);
    const nsPid = view.getUint32(at + L.ns_pid, true);
    this.nsPid = nsPid > 0 ? nsPid : undefined;
  }

  // Read when asked, as each allocates: the exec time and the grandparent by an alert or the
  // process tree, the root by an allow decision for a container (never for a host path).
  get rootDev(): { major: number; minor: number } {
    const rootDev = this.#batch.view.getUint32(this.#at + L.root_dev, true);
    return { major: rootDev >>> 20, minor: rootDev & 0xfffff };
  }

  get execNs(): bigint {
    return this.#batch.view.getBigUint64(this.#at + L.exec_ns, true);
  }

  get grandparent(): { pid: number; startNs: bigint } | undefined {
    const { view } = this.#batch;
    const pid = view.getUint32(this.#at + L.grandparent_pid, true);
    return pid > 0 ? { pid, startNs: view.getBigUint64(this.#at + L.grandparent_start_ns, true) } : undefined;
  }

  get parent(): ProcessIdentity["parent"] {
    this.#parent ??= decodeParent(this.#batch, this.#at, this.ppid);
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

function decodeParent({ bytes, view }: RecordBatch, at: number, ppid: number): ProcessIdentity["parent"] {
  const relation = view.getUint32(at + L.relation, true);
  const flags = view.getUint32(at + L.parent_flags, true);
  return {
    pid: ppid,
    comm: cString(bytes, at + L.parent_comm, L.commSize),
    exe: decodeExecIdentity(flags, cString(bytes, at + L.parent_exe, EXE_MAX)),
    provenance: decodeProvenance(
      flags,
      keyFromKernelDev(
        view.getUint32(at + L.parent_exe_dev, true),
        view.getBigUint64(at + L.parent_exe_ino, true),
      ),
    ),
    chroot: (relation & REL.parentChroot) !== 0,
    execedSinceFork: (relation & REL.parentExeced) !== 0,
    reparented: (relation & REL.reparented) !== 0,
  };
}
