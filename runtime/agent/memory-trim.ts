/**
 * Gives back to the kernel the memory malloc holds but no longer uses, now and then. Starting
 * up parses the kernel's BTF (libbpf and kernel-btf.ts), sets up TLS and lists the cluster: glibc
 * keeps what that freed in its arenas, so an idle agent would carry its start's peak for ever.
 * malloc_trim(0) releases the free pages of every arena (docs/operations.md, the agent's memory).
 */
import type { Logger } from "../log.ts";

export interface MemoryTrimOptions {
  /** The first trim, after start (default 10 s: the program is loaded, the first lists are in). */
  firstMs?: number;
  /** Then every (default 60 s). */
  everyMs?: number;
  /** malloc_trim; absent where the C library has none (the agent then says so once and goes on). */
  trim?: (() => number) | undefined;
}

/** Starts trimming; returns the stop. */
export function startMemoryTrim(log: Logger, options: MemoryTrimOptions = {}): () => void {
  const trim = options.trim;
  if (!trim) {
    log.info("malloc_trim is not available: memory freed by malloc stays with the agent", {});
    return () => {};
  }
  const run = () => {
    try {
      trim();
    } catch (error) {
      log.warn("malloc_trim failed; tried again later", { error });
    }
  };
  let every: NodeJS.Timeout | undefined;
  const first = setTimeout(() => {
    run();
    every = setInterval(run, options.everyMs ?? 60_000);
    every.unref();
  }, options.firstMs ?? 10_000);
  first.unref();
  return () => {
    clearTimeout(first);
    clearInterval(every);
  };
}

/** glibc's malloc_trim(0) through koffi, or undefined when the C library has none. */
export async function mallocTrim(): Promise<(() => number) | undefined> {
  try {
    const { libcFns } = await import("../kernel/libbpf-ffi.ts");
    const fn = libcFns().malloc_trim;
    return () => fn(0) as number;
  } catch {
    return undefined; // not glibc (musl has no malloc_trim): nothing to trim with
  }
}
