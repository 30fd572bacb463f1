/**
 * Joins the two halves of discovery: container id → PID (container-runtime.ts) → the
 * container's process held open and verified (container-process.ts) → trap paths resolved
 * under its root (safe-path.ts). The process is looked up and opened once per container and
 * reused for all of its traps; each resolution re-checks that it is still the container's.
 * The walks run off the event loop with a deadline (resolve-pool.ts), all traps of one
 * container in one batch under one root.
 */
import { closeSync } from "node:fs";
import type { ProveHook } from "../kernel/trap-proof.ts";
import { type ContainerProcess, openContainerProcess } from "./container-process.ts";
import { bareContainerId, type ContainerRuntime } from "./container-runtime.ts";
import {
  ResolvePool,
  type ResolvePoolOptions,
  type ResolvePoolStats,
  type ResolveWalk,
} from "./resolve-pool.ts";
import { type ResolvedFile, type ResolveOptions, resolveInRootFd } from "./safe-path.ts";

/** What one path of ContainerFiles.resolveAll came to. */
export type ResolveOutcome = { ok: true; file: ResolvedFile } | { ok: false; error: unknown };

export interface ContainerFiles {
  pid: number;
  /**
   * Rejects with HiveError: FileNotFound, PathEscapesContainer, PathInvalid (also past the
   * deadline, with `details.timedOut`), ContainerNotFound.
   */
  resolve(path: string, options?: ResolveOptions): Promise<ResolvedFile>;
  /**
   * Several paths in one trip to a resolver thread (cheaper than one resolve each); outcomes in
   * the order of `walks`, with the errors resolve() would reject with. Never rejects.
   */
  resolveAll(walks: readonly ResolveWalk[]): Promise<ResolveOutcome[]>;
  /** Lets go of the container's process; `resolve` then throws ContainerNotFound. */
  close(): void;
}

export interface FileResolver {
  /**
   * Finds the container's process and holds it. Throws HiveError: ContainerNotReady,
   * ContainerNotFound (also when the PID the runtime named is no longer the container's),
   * RuntimeUnavailable. The caller closes what it gets.
   */
  openContainer(containerId: string): Promise<ContainerFiles>;
  /** One path in one container (openContainer + resolve + close). */
  resolve(
    containerId: string,
    path: string,
    options?: ResolveOptions,
  ): Promise<ResolvedFile & { pid: number }>;
  /** Stops the resolver's threads. */
  close?(): Promise<void>;
  /** Its threads stuck past the deadline and its timed-out walks (for the agent's metrics). */
  stats?(): ResolvePoolStats;
}

/** Resolves `path` under the held process's root, verifying it is still the container's before and after. */
export function resolveInProcessRoot(
  process: ContainerProcess,
  path: string,
  options?: ResolveOptions,
  prove?: ProveHook,
): ResolvedFile {
  const root = process.openRoot();
  try {
    const found = resolveInRootFd(root, path, options, prove);
    process.verify(); // the container outlived the walk: what was found is current
    return found;
  } catch (error) {
    process.verify(); // a container gone mid-walk is ContainerNotFound, not a missing file
    throw error;
  } finally {
    closeSync(root);
  }
}

/**
 * As resolveInProcessRoot for each of `walks`, with the walks in `pool` (off the event loop,
 * each with its deadline) under one root opened once. The process is verified once after all
 * walks: a container gone meanwhile turns every outcome into ContainerNotFound. Never rejects.
 */
export async function resolveAllInProcessRootOffLoop(
  pool: ResolvePool,
  process: ContainerProcess,
  walks: readonly ResolveWalk[],
  /** The container (its id): a path whose walk is stuck there is not walked again meanwhile. */
  scope = "",
): Promise<ResolveOutcome[]> {
  if (walks.length === 0) return [];
  let root: number;
  try {
    root = process.openRoot(); // procfs only: cannot block
  } catch (error) {
    return walks.map(() => ({ ok: false, error }));
  }
  const outcomes = (await Promise.allSettled(pool.resolveAll(root, walks, scope))).map(
    (s): ResolveOutcome =>
      s.status === "fulfilled" ? { ok: true, file: s.value } : { ok: false, error: s.reason },
  );
  try {
    process.verify(); // the container outlived the walks: what was found is current
  } catch (error) {
    return walks.map(() => ({ ok: false, error })); // gone mid-walk: ContainerNotFound, not a missing file
  }
  return outcomes;
}

export function createFileResolver(
  runtime: ContainerRuntime,
  procRoot = "/proc",
  options: ResolvePoolOptions = {},
): FileResolver {
  const pool = new ResolvePool(options);
  const openContainer = async (containerId: string): Promise<ContainerFiles> => {
    const { pid } = await runtime.findProcess(containerId);
    const id = bareContainerId(containerId);
    const process = openContainerProcess(procRoot, pid, id);
    return {
      pid,
      async resolve(path, resolveOptions) {
        const [outcome] = await resolveAllInProcessRootOffLoop(
          pool,
          process,
          [{ path, options: resolveOptions ?? {} }],
          id,
        );
        if (!outcome?.ok) throw outcome?.error;
        return outcome.file;
      },
      resolveAll: (walks) => resolveAllInProcessRootOffLoop(pool, process, walks, id),
      close: () => process.close(),
    };
  };
  return {
    openContainer,
    async resolve(containerId, path, resolveOptions) {
      const files = await openContainer(containerId);
      try {
        return { ...(await files.resolve(path, resolveOptions)), pid: files.pid };
      } finally {
        files.close();
      }
    },
    close: () => pool.close(),
    stats: () => pool.stats(),
  };
}
