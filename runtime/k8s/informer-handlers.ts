/**
 * Delivering the store's deltas to an informer's handlers. A handler that throws or rejects is
 * logged and the informer goes on: one bad object must not stop the watch for all the others.
 */
import type { Logger } from "../log.ts";
import type { Delta } from "./informer-store.ts";
import { objectKey } from "./object-key.ts";

export interface InformerHandlers<T> {
  add?: (obj: T) => void | Promise<void>;
  update?: (obj: T, old: T) => void | Promise<void>;
  delete?: (obj: T) => void | Promise<void>;
}

/** Calls the handler for `delta`, if any; never throws, never awaits (handlers run concurrently). */
export function deliver<T extends { metadata?: { namespace?: string; name?: string } }>(
  handlers: InformerHandlers<T> | undefined,
  delta: Delta<T>,
  log: Logger,
): void {
  const failed = (err: unknown) =>
    log.error(`${delta.kind} handler failed`, { object: objectKey(delta.obj), error: err });
  try {
    const result = callHandler(handlers, delta);
    if (result && typeof (result as Promise<void>).catch === "function")
      (result as Promise<void>).catch(failed);
  } catch (err) {
    failed(err);
  }
}

function callHandler<T>(handlers: InformerHandlers<T> | undefined, delta: Delta<T>): void | Promise<void> {
  switch (delta.kind) {
    case "add":
      return handlers?.add?.(delta.obj);
    case "update":
      return handlers?.update?.(delta.obj, delta.old);
    case "delete":
      return handlers?.delete?.(delta.obj);
  }
}
