/**
 * A kernel watcher for `hive watch` tests that records what standalone mode asks of the kernel
 * (the map, quieted and cleared cgroups) and lets the test raise the events a kernel would
 * (test/kernel covers the kernel itself).
 */
import type { KernelEvent, KernelWatcher, WatchEntry } from "../../runtime/kernel/contract.ts";

export function standInWatcher() {
  let listener: ((event: KernelEvent) => void) | undefined;
  let entries: readonly WatchEntry[] = [];
  const quiet = new Set<string>();
  let clears = 0;
  const watcher = {
    attachMode: "kprobe",
    sync: (next: readonly WatchEntry[]) => {
      entries = next;
      return { notWatched: [] };
    },
    onEvent: (l: (event: KernelEvent) => void) => {
      listener = l;
    },
    quiet: (cgroupId: bigint, group: number) => void quiet.add(`${cgroupId}/${group}`),
    clearQuiet: () => {
      quiet.clear();
      clears += 1;
    },
    counters: () => ({ events: 0n, lost: 0n, watched: entries.length }),
    ancestors: () => [],
    close: async () => undefined,
  } as unknown as KernelWatcher;
  return {
    watcher,
    entries: () => entries,
    emit: (event: KernelEvent) => listener?.(event),
    /** Quieted `cgroupId/group` keys, as the kernel's quiet map would hold them. */
    quieted: () => [...quiet],
    clears: () => clears,
  };
}
