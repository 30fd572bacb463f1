/**
 * Joins the two halves of discovery: container id → PID (container-runtime.ts) → trap
 * paths resolved under /proc/<pid>/root (safe-path.ts). The PID is looked up once per
 * container and reused for all of its traps.
 */
import type { ContainerRuntime } from "./container-runtime.ts";
import { type ResolvedFile, type ResolveOptions, resolveInRoot } from "./safe-path.ts";

export interface ContainerFiles {
  pid: number;
  /** Throws HiveError: FileNotFound, PathEscapesContainer, PathInvalid, ContainerNotFound. */
  resolve(path: string, options?: ResolveOptions): ResolvedFile;
}

export interface FileResolver {
  /** Finds the container's process. Throws HiveError: ContainerNotReady, ContainerNotFound, RuntimeUnavailable. */
  openContainer(containerId: string): Promise<ContainerFiles>;
  /** One path in one container (openContainer + resolve). */
  resolve(
    containerId: string,
    path: string,
    options?: ResolveOptions,
  ): Promise<ResolvedFile & { pid: number }>;
}

export function createFileResolver(runtime: ContainerRuntime, procRoot = "/proc"): FileResolver {
  const openContainer = async (containerId: string): Promise<ContainerFiles> => {
    const { pid } = await runtime.findProcess(containerId);
    const root = `${procRoot}/${pid}/root`;
    return { pid, resolve: (path, options) => resolveInRoot(root, path, options) };
  };
  return {
    openContainer,
    async resolve(containerId, path, options) {
      const files = await openContainer(containerId);
      return { ...files.resolve(path, options), pid: files.pid };
    },
  };
}
