/**
 * The worker thread that walks trap paths (safe-path.ts) for resolve-pool.ts, so that a lookup
 * the kernel never answers (a hung FUSE or NFS mount in a container) blocks this thread, never
 * the agent's event loop. Threads share the process's descriptor table: the root descriptor the
 * main thread opened is used here by number, and stays open until this thread has exited or
 * answered. Messages: ResolveRequest in, ResolveReply out (shared with resolve-pool.ts).
 */
import { parentPort } from "node:worker_threads";
import { isHiveError } from "../errors.ts";
import type { ResolveReply, ResolveRequest } from "./resolve-pool.ts";
import { resolveInRootFd } from "./safe-path.ts";

parentPort?.on("message", (request: ResolveRequest) => {
  let reply: ResolveReply;
  try {
    reply = {
      id: request.id,
      ok: true,
      file: resolveInRootFd(request.rootFd, request.path, request.options),
    };
  } catch (error) {
    reply = isHiveError(error)
      ? {
          id: request.id,
          ok: false,
          error: {
            code: error.code,
            message: error.message,
            object: error.object,
            hint: error.hint,
            details: error.details,
          },
        }
      : { id: request.id, ok: false, error: { message: String((error as Error)?.message ?? error) } };
  }
  parentPort?.postMessage(reply);
});
