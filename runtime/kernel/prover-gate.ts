/**
 * The provers' gate (bpf/prove.bpf.h hive_proving): how many threads are proving a trap, in an
 * mmap-able array map's one word. The trap program asks hive_provers (a hash lookup) about an
 * access(2) check only while it is not zero, so that nobody pays for proofs but while one runs.
 * Added to and taken from with atomic instructions on the map's own memory: several threads and
 * processes (the agent's resolver threads, `hive watch`) prove at once.
 */
import koffi from "koffi";
import { HiveError } from "../../api/errors.ts";
import { errnoName, libcFns } from "./libbpf-ffi.ts";

const PROT_READ = 1;
const PROT_WRITE = 2;
const MAP_SHARED = 1;
const MAP_FAILED = 0xffffffffffffffffn;
/** An mmap-able array map's memory is rounded up to a page. */
const LENGTH = 4096;

/** Adds `delta` to the gate of map `fd` (the map's memory, mapped for the call). */
export function addProvers(fd: number, delta: number): void {
  const libc = libcFns();
  const ptr = libc.mmap(null, LENGTH, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) as bigint;
  if (ptr === MAP_FAILED || ptr === 0n) {
    throw new HiveError("BpfCallFailed", `mapping the provers' gate failed: ${errnoName(koffi.errno())}`, {
      object: "hive_proving",
    });
  }
  try {
    Atomics.add(new Int32Array(koffi.view(ptr, 4)), 0, delta);
  } finally {
    libc.munmap(ptr, LENGTH);
  }
}

/** What the gate holds now (diagnostics and tests). */
export function proversCounted(fd: number): number {
  const libc = libcFns();
  const ptr = libc.mmap(null, LENGTH, PROT_READ, MAP_SHARED, fd, 0) as bigint;
  if (ptr === MAP_FAILED || ptr === 0n) return 0;
  try {
    return Atomics.load(new Int32Array(koffi.view(ptr, 4)), 0);
  } finally {
    libc.munmap(ptr, LENGTH);
  }
}
