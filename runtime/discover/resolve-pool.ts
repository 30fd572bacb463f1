/**
 * Trap paths resolved off the event loop, with a deadline. The walk (safe-path.ts) is
 * synchronous and a lookup on a hung FUSE or NFS mount inside a container never returns: run on
 * the main thread it would stop alerts, health answers and Lease renewals. Here each walk runs
 * in a worker thread (resolve-worker.ts); past the deadline the caller gets PathInvalid
 * (`timedOut: true`) and the thread is abandoned: terminate() only takes effect once the
 * blocked syscall returns, which may be never. An abandoned thread keeps the root descriptor it
 * was given (closed when the thread exits, so its number is never reused under it), is counted,
 * and is replaced by a fresh thread; past `maxStuck` of them resolutions are refused at once
 * rather than piling up threads.
 */
import { closeSync } from "node:fs";
import { Worker } from "node:worker_threads";
import { HiveError, type HiveErrorCode } from "../errors.ts";
import type { ResolvedFile, ResolveOptions } from "./safe-path.ts";

/** Default deadline of one resolution (ms). */
export const RESOLVE_TIMEOUT_MS = 5000;

export interface ResolvePoolOptions {
  /** Deadline of one resolution (ms, default RESOLVE_TIMEOUT_MS, 5 s). */
  timeoutMs?: number;
  /** Threads walking at once (default 2); further resolutions wait their turn. */
  maxWorkers?: number;
  /** Abandoned threads (stuck in a syscall) tolerated before resolutions are refused (default 8). */
  maxStuck?: number;
}

/** Main thread → worker. */
export interface ResolveRequest {
  id: number;
  rootFd: number;
  path: string;
  options: ResolveOptions;
}

/** Worker → main thread. */
export type ResolveReply =
  | { id: number; ok: true; file: ResolvedFile }
  | {
      id: number;
      ok: false;
      error: {
        code?: HiveErrorCode;
        message: string;
        object?: string | undefined;
        hint?: string | undefined;
        details?: Record<string, unknown>;
      };
    };

interface Job {
  rootFd: number;
  path: string;
  options: ResolveOptions;
  resolve: (file: ResolvedFile) => void;
  reject: (error: unknown) => void;
}

export interface ResolvePoolStats {
  /** Threads abandoned past the deadline that have not exited yet. */
  stuck: number;
  /** Resolutions that ran past the deadline since start. */
  timeouts: number;
}

export class ResolvePool {
  private readonly timeoutMs: number;
  private readonly maxWorkers: number;
  private readonly maxStuck: number;
  private readonly idle: Worker[] = [];
  private readonly queue: Job[] = [];
  private busy = 0;
  private stuck = 0;
  private timeouts = 0;
  private nextId = 1;
  private closed = false;

  constructor(options: ResolvePoolOptions = {}) {
    this.timeoutMs = options.timeoutMs ?? RESOLVE_TIMEOUT_MS;
    this.maxWorkers = options.maxWorkers ?? 2;
    this.maxStuck = options.maxStuck ?? 8;
  }

  /**
   * Resolves `path` under the directory `rootFd` holds, as resolveInRootFd does, in a worker
   * thread. Takes ownership of `rootFd`: it is closed once no thread can use it any more.
   */
  resolve(rootFd: number, path: string, options: ResolveOptions = {}): Promise<ResolvedFile> {
    return new Promise<ResolvedFile>((resolve, reject) => {
      if (this.closed || this.stuck >= this.maxStuck) {
        closeSync(rootFd);
        reject(
          this.closed
            ? new HiveError("PathInvalid", "the path resolver is closed", { object: path })
            : new HiveError(
                "PathInvalid",
                `${this.stuck} path resolutions are stuck in the kernel; no new one is started until they end`,
                {
                  object: path,
                  bound: this.maxStuck,
                  hint: "a filesystem in a container (FUSE, NFS) does not answer lookups; fix or unmount it",
                },
              ),
        );
        return;
      }
      this.queue.push({ rootFd, path, options, resolve, reject });
      this.pump();
    });
  }

  stats(): ResolvePoolStats {
    return { stuck: this.stuck, timeouts: this.timeouts };
  }

  /** Stops idle threads; abandoned ones end when their syscall does (they never keep the process alive). */
  async close(): Promise<void> {
    this.closed = true;
    for (const job of this.queue.splice(0)) {
      closeSync(job.rootFd);
      job.reject(new HiveError("PathInvalid", "the path resolver is closed", { object: job.path }));
    }
    await Promise.all(this.idle.splice(0).map((w) => w.terminate()));
  }

  private spawn(): Worker {
    // Compiled packages ship resolve-worker.js beside this file; sources run as .ts.
    const extension = import.meta.url.slice(import.meta.url.lastIndexOf("."));
    const worker = new Worker(new URL(`./resolve-worker${extension}`, import.meta.url));
    worker.unref(); // a thread blocked in the kernel must not keep the agent from exiting
    return worker;
  }

  private pump(): void {
    while (this.queue.length > 0 && this.busy < this.maxWorkers) {
      const job = this.queue.shift() as Job;
      this.busy += 1;
      this.run(this.idle.pop() ?? this.spawn(), job);
    }
  }

  private run(worker: Worker, job: Job): void {
    const id = this.nextId++;
    let settled = false;
    const finish = () => {
      settled = true;
      clearTimeout(timer);
      worker.off("message", onMessage);
      worker.off("error", onError);
      worker.off("exit", onExit);
      this.busy -= 1;
    };
    const onMessage = (reply: ResolveReply) => {
      if (reply.id !== id || settled) return;
      finish();
      closeSync(job.rootFd);
      if (this.closed) void worker.terminate();
      else this.idle.push(worker);
      if (reply.ok) job.resolve(reply.file);
      else job.reject(toError(reply.error, job.path));
      this.pump();
    };
    const onError = (error: Error) => {
      if (settled) return;
      finish();
      // The thread died (not a failed walk): nothing uses the descriptor any more.
      closeSync(job.rootFd);
      job.reject(
        new HiveError("PathInvalid", "the path resolver thread failed", { object: job.path, cause: error }),
      );
      this.pump();
    };
    const onExit = () => onError(new Error("the path resolver thread exited"));
    const timer = setTimeout(() => {
      if (settled) return;
      finish();
      this.timeouts += 1;
      this.stuck += 1;
      // The thread may still be inside open(): keep its root descriptor until it has exited.
      worker.once("exit", () => {
        this.stuck -= 1;
        closeSync(job.rootFd);
      });
      void worker.terminate();
      job.reject(
        new HiveError("PathInvalid", `resolving the trap path took longer than ${this.timeoutMs} ms`, {
          object: job.path,
          timedOut: true,
          bound: this.timeoutMs,
          hint: "a filesystem on the path (FUSE, NFS) does not answer; it is resolved again on the next pass",
        }),
      );
      this.pump();
    }, this.timeoutMs);
    worker.on("message", onMessage);
    worker.on("error", onError);
    worker.on("exit", onExit);
    worker.postMessage({
      id,
      rootFd: job.rootFd,
      path: job.path,
      options: job.options,
    } satisfies ResolveRequest);
  }
}

function toError(error: Extract<ResolveReply, { ok: false }>["error"], path: string): Error {
  if (error.code === undefined)
    return new HiveError(
      "PathInvalid",
      `unexpected failure while resolving the trap path: ${error.message}`,
      {
        object: path,
      },
    );
  return new HiveError(error.code, error.message, {
    ...error.details,
    ...(error.object === undefined ? {} : { object: error.object }),
    ...(error.hint === undefined ? {} : { hint: error.hint }),
  });
}
