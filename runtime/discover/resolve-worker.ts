/**
 * The worker thread that walks trap paths (safe-path.ts) for resolve-pool.ts, so that a lookup
 * the kernel never answers (a hung FUSE or NFS mount in a container) blocks this thread, never
 * the agent's event loop. Threads share the process's descriptor table: the root descriptor the
 * main thread opened is used here by number, and stays open until this thread has exited or
 * answered every walk of the batch. Messages: one ResolveRequest (a batch of walks under one
 * root) in, one ResolveReply per walk out (READY once, first), each sent as soon as its walk is done (the main
 * thread's deadline starts again at each). Shared with resolve-pool.ts.
 */
import { parentPort } from "node:worker_threads";
import { isHiveError } from "../errors.ts";
import { READY, type ResolveReply, type ResolveRequest, type WalkResult } from "./resolve-pool.ts";
import { type ResolveOptions, resolveInRootFd } from "./safe-path.ts";

/** One walk: everything done for one trap path happens here, and its outcome is what is sent back. */
function walk(rootFd: number, path: string, options: ResolveOptions): WalkResult {
  try {
    return { ok: true, file: resolveInRootFd(rootFd, path, options) };
  } catch (error) {
    return isHiveError(error)
      ? {
          ok: false,
          error: {
            code: error.code,
            message: error.message,
            object: error.object,
            hint: error.hint,
            details: error.details,
          },
        }
      : { ok: false, error: { message: String((error as Error)?.message ?? error) } };
  }
}

parentPort?.on("message", (request: ResolveRequest) => {
  request.walks.forEach(({ path, options }, index) => {
    parentPort?.postMessage({
      id: request.id,
      index,
      ...walk(request.rootFd, path, options),
    } satisfies ResolveReply);
  });
});
parentPort?.postMessage(READY);
