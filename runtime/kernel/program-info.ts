/**
 * What the kernel says of a loaded program (struct bpf_prog_info, include/uapi/linux/bpf.h):
 * its tag — a hash of its instructions, so two builds of Hive's program with different code
 * differ — and the runs it skipped because it was already running on that CPU (fentry
 * recursion, and kprobes since 6.7), which are checks it never saw.
 */
import { closeSync } from "node:fs";
import { check, libbpf } from "./libbpf-ffi.ts";

/** Offsets in struct bpf_prog_info (stable uapi; recursion_misses since 5.12). */
const TAG_OFFSET = 8;
const TAG_SIZE = 8;
const RECURSION_MISSES_OFFSET = 208;
const INFO_SIZE = 232;

export interface ProgramInfo {
  /** The program's tag, hex (what `bpftool prog` shows). */
  tag: string;
  /** Runs skipped by the kernel; undefined on kernels that do not count them (before 5.12). */
  misses: bigint | undefined;
}

export function programInfo(fd: number): ProgramInfo {
  const info = Buffer.alloc(INFO_SIZE);
  const len = [INFO_SIZE];
  check(libbpf().bpf_obj_get_info_by_fd(fd, info, len) as number, "reading a BPF program's info");
  const got = len[0] ?? 0;
  return {
    tag: info.subarray(TAG_OFFSET, TAG_OFFSET + TAG_SIZE).toString("hex"),
    misses: got >= RECURSION_MISSES_OFFSET + 8 ? info.readBigUInt64LE(RECURSION_MISSES_OFFSET) : undefined,
  };
}

/** The info of a program pinned at `path`, or undefined when none is pinned there. */
export function pinnedProgramInfo(path: string): ProgramInfo | undefined {
  const fd = libbpf().bpf_obj_get(path) as number;
  if (fd < 0) return undefined;
  try {
    return programInfo(fd);
  } finally {
    closeSync(fd); // node:fs closes any descriptor of this process, BPF objects included
  }
}
