/**
 * What the running agent's memory is, read from outside it the way the kernel accounts it
 * (/proc/PID/status, /proc/PID/smaps) and from its own /metrics (V8's heap and the memory held
 * outside it): the figure the DaemonSet's memory request is set from, and what it is made of.
 */
import { readdirSync, readFileSync } from "node:fs";

export interface AgentMemory {
  /** Resident set, and its parts: anonymous (heaps, stacks), file-backed (the node binary, libraries). */
  rssMiB: number;
  anonMiB: number;
  fileMiB: number;
  threads: number;
  /** How many of the threads have each name (`node`, `libuv-worker`, V8's, a worker thread's). */
  threadNames: Record<string, number>;
  /** Resident MiB by what is mapped: `node` (its binary), `[anon]`, `[heap]` (malloc), each library. */
  mappings: Record<string, number>;
  /** V8's heap (used, reserved) and what JS objects hold outside it (Buffers, native modules'). */
  heapUsedMiB: number;
  heapTotalMiB: number;
  externalMiB: number;
  /** V8's heap by space (new, old, code, large objects…): used of what the space holds, MiB. */
  heapSpacesMiB: Record<string, [used: number, total: number]>;
}

const MiB = (kib: number) => Math.round((kib / 1024) * 10) / 10;

function statusKiB(status: string, field: string): number {
  return Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? Number.NaN);
}

/** Resident KiB by mapping: the file's base name (`node`, `libbpf.so.1`…) or the kernel's label. */
function residentByMapping(pid: number): Map<string, number> {
  const by = new Map<string, number>();
  let name = "";
  for (const line of readFileSync(`/proc/${pid}/smaps`, "utf8").split("\n")) {
    const mapping = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (mapping) {
      const path = mapping[1] ?? "";
      name = path === "" ? "[anon]" : (path.split("/").pop() ?? path);
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss) by.set(name, (by.get(name) ?? 0) + Number(rss[1]));
  }
  return by;
}

/** [used, total] MiB of each of V8's heap spaces, from prom-client's nodejs_heap_space_size_* gauges. */
function heapSpaces(metrics: string): Record<string, [number, number]> {
  const spaces: Record<string, [number, number]> = {};
  for (const m of metrics.matchAll(
    /^nodejs_heap_space_size_(used|total)_bytes\{[^}]*space="(\w+)"[^}]*\} (\S+)$/gm,
  )) {
    const [, which, space = "", value] = m;
    spaces[space] ??= [0, 0];
    const entry = spaces[space];
    entry[which === "used" ? 0 : 1] = MiB(Number(value) / 1024);
  }
  return spaces;
}

function threadNames(pid: number): Record<string, number> {
  const names: Record<string, number> = {};
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    const comm = readFileSync(`/proc/${pid}/task/${task}/comm`, "utf8").trim();
    names[comm] = (names[comm] ?? 0) + 1;
  }
  return names;
}

export function agentMemory(pid: number, metrics: string): AgentMemory {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const gauge = (name: string) =>
    Number(new RegExp(`^${name} (\\S+)$`, "m").exec(metrics)?.[1] ?? Number.NaN);
  const mappings = Object.fromEntries(
    [...residentByMapping(pid)]
      .sort((a, b) => b[1] - a[1])
      .filter(([, kib]) => kib >= 512)
      .map(([name, kib]) => [name, MiB(kib)]),
  );
  return {
    rssMiB: MiB(statusKiB(status, "VmRSS")),
    anonMiB: MiB(statusKiB(status, "RssAnon")),
    fileMiB: MiB(statusKiB(status, "RssFile")),
    threads: Number(/^Threads:\s+(\d+)/m.exec(status)?.[1] ?? Number.NaN),
    threadNames: threadNames(pid),
    mappings,
    heapUsedMiB: MiB(gauge("nodejs_heap_size_used_bytes") / 1024),
    heapTotalMiB: MiB(gauge("nodejs_heap_size_total_bytes") / 1024),
    externalMiB: MiB(gauge("nodejs_external_memory_bytes") / 1024),
    heapSpacesMiB: heapSpaces(metrics),
  };
}
