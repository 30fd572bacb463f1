/**
 * The worker thread that walks trap paths (safe-path.ts) for resolve-pool.ts, so that a lookup
 * the kernel never answers (a hung FUSE or NFS mount in a container) blocks this thread, never
 * the agent's event loop. Threads share the process's descriptor table: the root descriptor the
 * main thread opened is used here by number, and stays open until this thread has exited or
 * answered every walk of the batch. Messages: one ResolveRequest (a batch of walks under one
 * root) in, one ResolveReply per walk out (READY once, first), each sent as soon as its walk is done (the main
 * thread's deadline starts again at each). Shared with resolve-pool.ts. Each file found is
 * proven here, while the walk still holds it (runtime/kernel/trap-proof.ts).
 */
import { parentPort } from "node:worker_threads";
import { HiveError, isHiveError } from "../../api/errors.ts";
import { type ProofMaps, type ProveHook, proveWith } from "../kernel/trap-proof.ts";
// Types only: the thread loads what it walks with, not the pool's main-thread side.
import type { ReadyMessage, ResolveReply, ResolveRequest, WalkResult } from "./resolve-pool.ts";
import { type ResolveOptions, resolveInRootFd } from "./safe-path.ts";

/** The prover of a request's proof maps (undefined: not asked for; null: no program loaded yet). */
function prover(proof: ProofMaps | null | undefined): ProveHook | undefined {
  if (proof === undefined) return undefined;
  if (proof === null)
    return ({ resolvedPath }) => {
      throw new HiveError(
        "TrapNotProven",
        "the kernel program is not loaded yet: the trap cannot be proven",
        {
          object: resolvedPath,
          pending: true,
          hint: "it is resolved again once the agent has loaded the program on this node",
        },
      );
    };
  return proveWith(proof);
}

/** One walk: everything done for one trap path happens here, and its outcome is what is sent back. */
function walk(
  rootFd: number,
  path: string,
  options: ResolveOptions,
  prove: ProveHook | undefined,
): WalkResult {
  try {
    return { ok: true, file: resolveInRootFd(rootFd, path, options, prove) };
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
  const prove = prover(request.proof);
  request.walks.forEach(({ path, options }, index) => {
    parentPort?.postMessage({
      id: request.id,
      index,
      ...walk(request.rootFd, path, options, prove),
    } satisfies ResolveReply);
  });
});
parentPort?.postMessage("ready" satisfies ReadyMessage);
