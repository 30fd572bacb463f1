/**
 * What the kernel recorded of a process's executable (HIVE_EXE_* of bpf/hive.h), as in
 * struct hive_event and struct hive_proc (hive_procs' values), and the string decoding both use.
 * Part of the layouts shared with bpf/hive.h (layout.ts).
 */
import type { ExecIdentity, ExecProvenance, ExeLayer, FileKey, LoaderEnvVar } from "./contract.ts";

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
/** A Buffer over the same bytes (no copy). */
export function asBuffer(buf: Uint8Array): Buffer {
  return Buffer.isBuffer(buf) ? buf : Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
}

/** A NUL-terminated string of a record, decoded without copying the bytes first. */
export function cString(buf: Buffer, offset: number, size: number): string {
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
