/**
 * Trap paths resolved off the event loop, with a deadline. The walk (safe-path.ts) is
 * synchronous and a lookup on a hung FUSE or NFS mount inside a container never returns: run on
 * the main thread it would stop alerts, health answers and Lease renewals. Here walks run in
 * worker threads (resolve-worker.ts).
 *
 * Walks travel in batches, all under one root (the traps of one container): one message out,
 * one reply back per walk as it completes. A round trip to a thread costs several times the
 * walk itself, so one per walk made discovery slower than walking on the event loop.
 *
 * The deadline is per walk: it starts when the batch is sent (to a fresh thread: once it has
 * loaded, so a slow start on a busy machine is never a walk's fault) and again at each reply.
 * Past it, the walk in progress ends as PathInvalid (`timedOut: true`) and the thread is
 * abandoned: terminate() only takes effect once the blocked syscall returns, which may be
 * never. The walks already answered keep their results; the ones after the hung walk go back
 * to the front of the queue as a batch of their own and run on a fresh thread (a container's
 * other traps are often outside the mount that hangs). An abandoned thread keeps the root
 * descriptor (closed when both the thread has exited and the rest of its batch is done, so its
 * number is never reused under it), is counted, and past `maxStuck` of them walks are refused
 * at once rather than piling up threads.
 */
import { closeSync } from "node:fs";
import { Worker } from "node:worker_threads";
import { HiveError, type HiveErrorCode } from "../../api/errors.ts";
import { PinnedProofMaps, type ProofMaps } from "../kernel/trap-proof.ts";
import { IdleThreads } from "./idle-threads.ts";
import type { ResolvedFile, ResolveOptions } from "./safe-path.ts";

/** Default deadline of one resolution (ms). */
export const RESOLVE_TIMEOUT_MS = 5000;
/** Default time an idle thread is kept for the next batch (ms): a pod start's passes come within it. */
export const IDLE_THREAD_MS = 10_000;

export interface ResolvePoolOptions {
  /** Deadline of one walk (ms, default RESOLVE_TIMEOUT_MS, 5 s). */
  timeoutMs?: number;
  /** Threads walking at once (default 2); further batches wait their turn. */
  maxWorkers?: number;
  /** Abandoned threads (stuck in a syscall) tolerated before walks are refused (default 8). */
  maxStuck?: number;
  /**
   * How long a thread with nothing to walk is kept (ms, default IDLE_THREAD_MS): each holds an
   * isolate of its own (about 14 MiB), which an idle node should not pay for.
   */
  idleMs?: number;
  /**
   * bpffs directory of the kernel program's pins: each walk's file is proven with its maps
   * (runtime/kernel/trap-proof.ts), and fails TrapNotProven while none is loaded. Absent: the
   * identity stat() gives is armed unproven.
   */
  proofPinRoot?: string;
}

/** The message a thread sends once, when it has loaded and listens. */
export type ReadyMessage = "ready";
const READY: ReadyMessage = "ready";

/** One path to resolve under a batch's root. */
export interface ResolveWalk {
  path: string;
  options?: ResolveOptions;
}

/** Main thread → worker: walks under one root, done in order. */
export interface ResolveRequest {
  id: number;
  rootFd: number;
  walks: { path: string; options: ResolveOptions }[];
  /** Descriptors of the proof maps; null: proving is asked for and no program is loaded yet. */
  proof?: ProofMaps | null;
}

/** What one walk found, as the worker sends it (an error as plain data: HiveError does not cross threads). */
export type WalkResult =
  | { ok: true; file: ResolvedFile }
  | {
      ok: false;
      error: {
        code?: HiveErrorCode;
        message: string;
        object?: string | undefined;
        hint?: string | undefined;
        details?: Record<string, unknown>;
      };
    };

/** Worker → main thread: one per walk of request `id`, in order (`index` into its walks). */
export type ResolveReply = { id: number; index: number } & WalkResult;

interface Walk {
  path: string;
  options: ResolveOptions;
  resolve: (file: ResolvedFile) => void;
  reject: (error: unknown) => void;
}

/** A root descriptor shared by a batch and the abandoned threads that may still be walking under it. */
interface Root {
  fd: number;
  holders: number;
}

const release = (root: Root) => {
  root.holders -= 1;
  if (root.holders === 0) closeSync(root.fd);
};

interface Batch {
  root: Root;
  /** Not answered yet, in order. */
  walks: Walk[];
  /** What the root belongs to (a container id): a path stuck there is not walked again meanwhile. */
  scope: string;
}

export interface ResolvePoolStats {
  /** Threads abandoned past the deadline that have not exited yet. */
  stuck: number;
  /** Walks that ran past the deadline since start. */
  timeouts: number;
  /** Batches sent to a thread since start (a batch that lost its thread to a hung walk counts again for its rest). */
  batches: number;
}

export class ResolvePool {
  private readonly timeoutMs: number;
  private readonly maxWorkers: number;
  private readonly maxStuck: number;
  private readonly idle: IdleThreads;
  private readonly queue: Batch[] = [];
  private busy = 0;
  private stuck = 0;
  private timeouts = 0;
  private batches = 0;
  private nextId = 1;
  private closed = false;
  /** Threads that have not said READY yet. */
  private readonly starting = new Map<Worker, Promise<void>>();
  private readonly proofMaps: PinnedProofMaps | null;
  /** Walks abandoned in the kernel (scope + path → threads), until their thread exits. */
  private readonly stuckWalks = new Map<string, number>();

  constructor(options: ResolvePoolOptions = {}) {
    this.timeoutMs = options.timeoutMs ?? RESOLVE_TIMEOUT_MS;
    this.maxWorkers = options.maxWorkers ?? 2;
    this.maxStuck = options.maxStuck ?? 8;
    this.idle = new IdleThreads(options.idleMs ?? IDLE_THREAD_MS);
    this.proofMaps = options.proofPinRoot === undefined ? null : new PinnedProofMaps(options.proofPinRoot);
  }

  /**
   * Resolves `path` under the directory `rootFd` holds, as resolveInRootFd does, in a worker
   * thread. Takes ownership of `rootFd`: it is closed once no thread can use it any more.
   */
  resolve(rootFd: number, path: string, options: ResolveOptions = {}): Promise<ResolvedFile> {
    return this.resolveAll(rootFd, [{ path, options }])[0] as Promise<ResolvedFile>;
  }

  /**
   * Resolves each of `walks` under the directory `rootFd` holds, in order, in one worker
   * thread; one promise per walk, each settled as soon as its walk is done. Takes ownership of
   * `rootFd` as resolve() does. Rejections are HiveErrors (PathInvalid with `timedOut` past the
   * deadline, and whatever the walk itself reports).
   */
  resolveAll(rootFd: number, walks: readonly ResolveWalk[], scope = ""): Promise<ResolvedFile>[] {
    const batch: Batch = { root: { fd: rootFd, holders: 1 }, walks: [], scope };
    const promises = walks.map(
      (w) =>
        new Promise<ResolvedFile>((resolve, reject) => {
          // Its last walk still hangs in the kernel: another would only strand one more thread.
          if (this.stuckWalks.has(stuckKey(scope, w.path))) reject(this.stillStuck(w.path));
          else batch.walks.push({ path: w.path, options: w.options ?? {}, resolve, reject });
        }),
    );
    if (batch.walks.length === 0) release(batch.root);
    else if (!this.refused(batch)) {
      this.queue.push(batch);
      this.pump();
    }
    return promises;
  }

  stats(): ResolvePoolStats {
    return { stuck: this.stuck, timeouts: this.timeouts, batches: this.batches };
  }

  /** The threads kept for the next batch, and those started so far (diagnostics and tests). */
  get idleThreads(): number {
    return this.idle.size;
  }
  threadsStarted = 0;

  /** Stops idle threads; abandoned ones end when their syscall does (they never keep the process alive). */
  async close(): Promise<void> {
    this.closed = true;
    for (const batch of this.queue.splice(0)) this.refused(batch);
    await this.idle.close();
    this.proofMaps?.close();
  }

  private stillStuck(path: string): HiveError {
    return new HiveError("PathInvalid", "the trap path's last resolution is still stuck in the kernel", {
      object: path,
      timedOut: true,
      bound: this.timeoutMs,
      hint: "a filesystem on the path (FUSE, NFS) does not answer; it is resolved again once that lookup returns",
    });
  }

  /** Rejects the whole batch (and lets go of its root) when the pool is closed or too many threads are stuck. */
  private refused(batch: Batch): boolean {
    if (!this.closed && this.stuck < this.maxStuck) return false;
    for (const walk of batch.walks.splice(0))
      walk.reject(
        this.closed
          ? new HiveError("PathInvalid", "the path resolver is closed", { object: walk.path })
          : new HiveError(
              "PathInvalid",
              `${this.stuck} path resolutions are stuck in the kernel; no new one is started until they end`,
              {
                object: walk.path,
                bound: this.maxStuck,
                // Not this path's fault: what it had stays armed, and it is resolved again.
                refused: true,
                hint: "a filesystem in a container (FUSE, NFS) does not answer lookups; fix or unmount it",
              },
            ),
      );
    release(batch.root);
    return true;
  }

  private spawn(): Worker {
    this.threadsStarted += 1;
    // Compiled packages ship resolve-worker.js beside this file; sources run as .ts.
    const extension = import.meta.url.slice(import.meta.url.lastIndexOf("."));
    const worker = new Worker(new URL(`./resolve-worker${extension}`, import.meta.url));
    worker.unref(); // a thread blocked in the kernel must not keep the agent from exiting
    // Its first message says it has loaded (READY): starting a thread is not part of any walk's deadline.
    this.starting.set(
      worker,
      new Promise<void>((resolve) => {
        const onReady = (message: unknown) => {
          if (message !== READY) return;
          worker.off("message", onReady);
          this.starting.delete(worker);
          resolve();
        };
        worker.on("message", onReady);
        worker.once("exit", () => this.starting.delete(worker));
      }),
    );
    return worker;
  }

  private pump(): void {
    while (this.queue.length > 0 && this.busy < this.maxWorkers) {
      const batch = this.queue.shift() as Batch;
      if (this.refused(batch)) continue;
      this.busy += 1;
      this.run(this.idle.take() ?? this.spawn(), batch);
    }
  }

  private run(worker: Worker, batch: Batch): void {
    const id = this.nextId++;
    this.batches += 1;
    const { root, walks } = batch;
    /** walks[next] is the one the thread is on. */
    let next = 0;
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
      const walk = walks[reply.index] as Walk;
      next = reply.index + 1;
      if (next === walks.length) {
        finish();
        release(root);
        if (this.closed) void worker.terminate();
        else this.idle.keep(worker);
      } else timer?.refresh(); // the next walk's deadline
      if (reply.ok) walk.resolve(reply.file);
      else walk.reject(toError(reply.error, walk.path));
      if (settled) this.pump();
    };
    const onError = (error: Error) => {
      if (settled) return;
      finish();
      // The thread died (not a failed walk): nothing uses the descriptor any more.
      release(root);
      for (const walk of walks.slice(next))
        walk.reject(
          new HiveError("PathInvalid", "the path resolver thread failed", {
            object: walk.path,
            cause: error,
            // The resolver's failure, not the path's: what the trap had stays armed.
            transient: true,
          }),
        );
      this.pump();
    };
    const onExit = () => onError(new Error("the path resolver thread exited"));
    const onTimeout = () => {
      if (settled) return;
      finish();
      this.timeouts += 1;
      this.stuck += 1;
      const hung = walks[next] as Walk;
      const key = stuckKey(batch.scope, hung.path);
      this.stuckWalks.set(key, (this.stuckWalks.get(key) ?? 0) + 1);
      // The thread may still be inside open(): it holds the root descriptor until it has exited.
      root.holders += 1;
      worker.once("exit", () => {
        this.stuck -= 1;
        const left = (this.stuckWalks.get(key) ?? 1) - 1;
        if (left > 0) this.stuckWalks.set(key, left);
        else this.stuckWalks.delete(key);
        release(root);
      });
      void worker.terminate();
      const rest = walks.slice(next + 1);
      if (rest.length > 0) this.queue.unshift({ root, walks: rest, scope: batch.scope });
      else release(root);
      hung.reject(
        new HiveError("PathInvalid", `resolving the trap path took longer than ${this.timeoutMs} ms`, {
          object: hung.path,
          timedOut: true,
          bound: this.timeoutMs,
          hint: "a filesystem on the path (FUSE, NFS) does not answer; it is resolved again on the next pass",
        }),
      );
      this.pump();
    };
    // The first walk's deadline starts once the thread runs (at once for a thread that has walked before).
    let timer: NodeJS.Timeout | undefined;
    const arm = () => {
      if (!settled) timer = setTimeout(onTimeout, this.timeoutMs);
    };
    const starting = this.starting.get(worker);
    if (starting) void starting.then(arm);
    else arm();
    worker.on("message", onMessage);
    worker.on("error", onError);
    worker.on("exit", onExit);
    worker.postMessage({
      id,
      rootFd: root.fd,
      walks: walks.map((w) => ({ path: w.path, options: w.options })),
      ...(this.proofMaps ? { proof: this.proofMaps.current() } : {}),
    } satisfies ResolveRequest);
  }
}

const stuckKey = (scope: string, path: string) => `${scope}\0${path}`;

function toError(error: Extract<WalkResult, { ok: false }>["error"], path: string): Error {
  if (error.code === undefined)
    return new HiveError(
      "PathInvalid",
      `unexpected failure while resolving the trap path: ${error.message}`,
      {
        object: path,
        transient: true,
      },
    );
  return new HiveError(error.code, error.message, {
    ...error.details,
    ...(error.object === undefined ? {} : { object: error.object }),
    ...(error.hint === undefined ? {} : { hint: error.hint }),
  });
}
