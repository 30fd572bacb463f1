/**
 * Joins the two halves of discovery: container id → PID (container-runtime.ts) → the
 * container's process held open and verified (container-process.ts) → trap paths resolved
 * under its root (safe-path.ts). The process is looked up and opened once per container and
 * reused for all of its traps; each resolution re-checks that it is still the container's.
 */
import { closeSync } from "node:fs";
import { type ContainerProcess, openContainerProcess } from "./container-process.ts";
import { bareContainerId, type ContainerRuntime } from "./container-runtime.ts";
import { type ResolvedFile, type ResolveOptions, resolveInRootFd } from "./safe-path.ts";

export interface ContainerFiles {
  pid: number;
  /** Throws HiveError: FileNotFound, PathEscapesContainer, PathInvalid, ContainerNotFound. */
  resolve(path: string, options?: ResolveOptions): ResolvedFile;
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

export function createFileResolver(runtime: ContainerRuntime, procRoot = "/proc"): FileResolver {
  const openContainer = async (containerId: string): Promise<ContainerFiles> => {
    const { pid } = await runtime.findProcess(containerId);
    const process = openContainerProcess(procRoot, pid, bareContainerId(containerId));
    return {
      pid,
      resolve: (path, options) => resolveInProcessRoot(process, path, options),
      close: () => process.close(),
    };
  };
  return {
    openContainer,
    async resolve(containerId, path, options) {
      const files = await openContainer(containerId);
      try {
        return { ...files.resolve(path, options), pid: files.pid };
      } finally {
        files.close();
      }
    },
  };
}
