/**
 * Joins the two halves of discovery: container id → PID (container-runtime.ts) → the trap
 * path resolved under /proc/<pid>/root (safe-path.ts). The controller sees one async call.
 */
import type { ContainerRuntime } from "./container-runtime.ts";
import { type ResolvedFile, type ResolveOptions, resolveInRoot } from "./safe-path.ts";

export interface FileResolver {
  /** Throws HiveError: ContainerNotReady, ContainerNotFound, FileNotFound, PathEscapesContainer, PathInvalid. */
  resolve(
    containerId: string,
    path: string,
    options?: ResolveOptions,
  ): Promise<ResolvedFile & { pid: number }>;
}

export function createFileResolver(runtime: ContainerRuntime, procRoot = "/proc"): FileResolver {
  return {
    async resolve(containerId, path, options) {
      const { pid } = await runtime.findProcess(containerId);
      return { ...resolveInRoot(`${procRoot}/${pid}/root`, path, options), pid };
    },
  };
}
