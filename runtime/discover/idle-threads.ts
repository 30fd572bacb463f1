/**
 * The resolver's threads between batches (resolve-pool.ts): kept for the next batch, and stopped
 * once none came for `idleMs`. Each holds an isolate of its own (about 14 MiB), which an idle
 * node should not pay for, while the passes of one pod start reuse a warm thread.
 */
import type { Worker } from "node:worker_threads";

export class IdleThreads {
  private readonly idleMs: number;
  private readonly threads: Worker[] = [];
  /** When each idle thread is stopped unless a batch takes it first. */
  private readonly timers = new Map<Worker, NodeJS.Timeout>();

  constructor(idleMs: number) {
    this.idleMs = idleMs;
  }

  get size(): number {
    return this.threads.length;
  }

  /** Keeps a thread that finished its batch, until idleMs passes without another. */
  keep(worker: Worker): void {
    this.threads.push(worker);
    const timer = setTimeout(() => {
      this.timers.delete(worker);
      const at = this.threads.indexOf(worker);
      if (at < 0) return;
      this.threads.splice(at, 1);
      void worker.terminate();
    }, this.idleMs);
    timer.unref();
    this.timers.set(worker, timer);
  }

  /** A kept thread for the next batch, if any. */
  take(): Worker | undefined {
    const worker = this.threads.pop();
    if (worker) {
      clearTimeout(this.timers.get(worker));
      this.timers.delete(worker);
    }
    return worker;
  }

  /** Stops every kept thread. */
  async close(): Promise<void> {
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    await Promise.all(this.threads.splice(0).map((w) => w.terminate()));
  }
}
