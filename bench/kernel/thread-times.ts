/**
 * The agent's CPU by thread in the kernel bench's guest: its main thread (which drains the ring),
 * libuv's pool (where the drain's poll(2) waits) and V8's helpers, from /proc/self/task
 * (schedstat: nanoseconds, so guest instructions under icount).
 */
import { readdirSync, readFileSync } from "node:fs";

/**
 * CPU time of this process's threads by kind (schedstat: ns, so guest instructions here): the
 * main thread, libuv's pool and V8's helpers (GC, compilers); since `from`.
 */
export function threadTimes(from?: ThreadTimes): ThreadTimes {
  const out: ThreadTimes = { main: 0, pool: 0, v8: 0 };
  for (const tid of readdirSync("/proc/self/task")) {
    try {
      const comm = readFileSync(`/proc/self/task/${tid}/comm`, "utf8").trim();
      const ns = Number(readFileSync(`/proc/self/task/${tid}/schedstat`, "utf8").split(" ")[0]);
      const kind =
        comm === "MainThread" || comm === "node" ? "main" : comm === "libuv-worker" ? "pool" : "v8";
      out[kind] += ns;
    } catch {
      // A thread that exited between the listing and the read: its time is gone with it.
    }
  }
  if (from) for (const k of ["main", "pool", "v8"] as const) out[k] -= from[k];
  return out;
}

export type ThreadTimes = { main: number; pool: number; v8: number };

/** Each kind of thread's CPU per event, over the run without events. */
export function perEventByThread(
  run: { byThread: ThreadTimes; events: number },
  base: { byThread: ThreadTimes },
): ThreadTimes {
  const per = (k: keyof ThreadTimes) => (run.byThread[k] - base.byThread[k]) / Math.max(1, run.events);
  return { main: per("main"), pool: per("pool"), v8: per("v8") };
}
