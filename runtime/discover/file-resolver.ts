/**
 * Joins the two halves of discovery: container id → PID (container-runtime.ts) → the
 * container's process held open and verified (container-process.ts) → trap paths resolved
 * under its root (safe-path.ts). The process is looked up and opened once per container and
 * reused for all of its traps; each resolution re-checks that it is still the container's.
 * The walk itself runs off the event loop with a deadline (resolve-pool.ts).
 */
import { closeSync } from "node:fs";
import { type ContainerProcess, openContainerProcess } from "./container-process.ts";
import { bareContainerId, type ContainerRuntime } from "./container-runtime.ts";
import { ResolvePool, type ResolvePoolOptions } from "./resolve-pool.ts";
import { type ResolvedFile, type ResolveOptions, resolveInRootFd } from "./safe-path.ts";

export interface ContainerFiles {
  pid: number;
  /**
   * Rejects with HiveError: FileNotFound, PathEscapesContainer, PathInvalid (also past the
   * deadline, with `details.timedOut`), ContainerNotFound.
   */
  resolve(path: string, options?: ResolveOptions): Promise<ResolvedFile>;
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
}

/** Resolves `path` under the held process's root, verifying it is still the container's before and after. */
export function resolveInProcessRoot(
  process: ContainerProcess,
  path: string,
  options?: ResolveOptions,
): ResolvedFile {
  const root = process.openRoot();
  try {
    const found = resolveInRootFd(root, path, options);
    process.verify(); // the container outlived the walk: what was found is current
    return found;
  } catch (error) {
    process.verify(); // a container gone mid-walk is ContainerNotFound, not a missing file
    throw error;
  } finally {
    closeSync(root);
  }
}

/** As resolveInProcessRoot, with the walk in `pool` (off the event loop, with its deadline). */
export async function resolveInProcessRootOffLoop(
  pool: ResolvePool,
  process: ContainerProcess,
  path: string,
  options?: ResolveOptions,
): Promise<ResolvedFile> {
  const root = process.openRoot(); // procfs only: cannot block
  try {
    const found = await pool.resolve(root, path, options); // the pool closes root
    process.verify(); // the container outlived the walk: what was found is current
    return found;
  } catch (error) {
    process.verify(); // a container gone mid-walk is ContainerNotFound, not a missing file
    throw error;
  }
}

export function createFileResolver(
  runtime: ContainerRuntime,
  procRoot = "/proc",
  options: ResolvePoolOptions = {},
): FileResolver {
  const pool = new ResolvePool(options);
  const openContainer = async (containerId: string): Promise<ContainerFiles> => {
    const { pid } = await runtime.findProcess(containerId);
    const process = openContainerProcess(procRoot, pid, bareContainerId(containerId));
    return {
      pid,
      resolve: (path, resolveOptions) => resolveInProcessRootOffLoop(pool, process, path, resolveOptions),
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
  };
}
