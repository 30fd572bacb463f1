/**
 * What an earlier agent of another map layout left unread in its pinned maps: records in its
 * ring buffer and bursts pending in its burst table. Their layout is another version's, so this
 * version cannot decode them; they are counted before the pins are replaced, never lost silently.
 * Counting needs no layout: ring records carry their own length, burst keys are thread ids.
 */
import { closeSync, existsSync } from "node:fs";
import { join } from "node:path";
import { libbpf } from "./libbpf-ffi.ts";
import { RingReader } from "./ring-reader.ts";

export interface PinnedBacklog {
  /** Committed ring records not released (read or not) by the earlier agent. */
  events: number;
  /** Bursts pending in its burst table. */
  bursts: number;
}

export function countPinnedBacklog(pinRoot: string): PinnedBacklog {
  const lib = libbpf();
  const open = (name: string): number => {
    const path = join(pinRoot, name);
    return existsSync(path) ? (lib.bpf_obj_get(path) as number) : -1;
  };
  let events = 0;
  const ring = open("hive_events");
  if (ring >= 0) {
    try {
      const reader = new RingReader(ring);
      events = reader.consume(() => {}); // reads from the released position; releases nothing
      reader.close();
    } finally {
      closeSync(ring);
    }
  }
  let bursts = 0;
  const table = open("hive_bursts");
  if (table >= 0) {
    try {
      const key = Buffer.alloc(4);
      const next = Buffer.alloc(4);
      let first = true;
      while ((lib.bpf_map_get_next_key(table, first ? null : key, next) as number) === 0) {
        first = false;
        next.copy(key);
        bursts++;
      }
    } finally {
      closeSync(table);
    }
  }
  return { events, bursts };
}
