/**
 * The kernel's watch map (hive_watch) and its pre-filter bitmap (hive_bitmap), kept equal to
 * the entries the loader wants: a diff against what the map holds, removals first so that a
 * full map recovers as soon as entries go, and what still does not fit returned, never thrown.
 */
import { HiveError } from "../../api/errors.ts";
import type { Logger } from "../log.ts";
import type { FileKey, SyncResult, WatchEntry } from "./contract.ts";
import {
  BITMAP_MASK,
  BITMAP_WORDS,
  decodeKey,
  encodeKey,
  encodeValue,
  fileKeyId,
  KEY_LAYOUT,
  VALUE_LAYOUT,
} from "./layout.ts";
import { check, forEachMapEntry, type Libbpf } from "./libbpf-ffi.ts";

interface Stored {
  key: Buffer;
  value: Buffer;
  ino: bigint;
}

function bitmapOf(inos: Iterable<bigint>): BigUint64Array {
  const words = new BigUint64Array(BITMAP_WORDS);
  for (const ino of inos) {
    const bit = ino & BITMAP_MASK;
    const word = Number(bit >> 6n);
    words[word] = (words[word] ?? 0n) | (1n << (bit & 63n));
  }
  return words;
}

export class WatchMap {
  /** Entries the last sync had no room for. */
  notWatched = 0;
  private readonly current = new Map<string, Stored>();
  private bitmap: BigUint64Array = new BigUint64Array(BITMAP_WORDS);
  private readonly lib: Libbpf;
  private readonly fds: { watch: number; bitmap: number; followed?: number };
  private readonly capacity: number;
  private readonly logger: Logger | undefined;

  /** Loads what the map holds already (an adopted map, or nothing) and rewrites the bitmap. */
  constructor(
    lib: Libbpf,
    fds: { watch: number; bitmap: number; followed?: number },
    capacity: number,
    logger?: Logger,
  ) {
    this.lib = lib;
    this.fds = fds;
    this.capacity = capacity;
    this.logger = logger;
    forEachMapEntry(fds.watch, KEY_LAYOUT.size, VALUE_LAYOUT.size, (key, value) => {
      const fileKey = decodeKey(key);
      this.current.set(fileKeyId(fileKey), {
        key: Buffer.from(key),
        value: Buffer.from(value),
        ino: fileKey.ino,
      });
    });
    this.writeBitmap(new BigUint64Array(BITMAP_WORDS).fill(~0n)); // rewrite all words once
  }

  /** Entries the map holds. */
  get size(): number {
    return this.current.size;
  }

  /** The file of the entry at `slot` (a scan: for the rare summary whose last event was forgotten). */
  keyOfSlot(slot: number): FileKey | undefined {
    for (const stored of this.current.values())
      if (stored.value.readUInt32LE(VALUE_LAYOUT.slot) === slot) return decodeKey(stored.key);
    return undefined;
  }

  sync(entries: readonly WatchEntry[]): SyncResult {
    const desired = new Map<string, Stored & { entry: WatchEntry }>();
    for (const entry of entries) {
      const id = fileKeyId(entry.key);
      if (desired.has(id)) {
        throw new HiveError("ConfigInvalid", `two watch entries for the same file ${id}`, {
          object: id,
          hint: "give each (device, inode) one entry",
        });
      }
      desired.set(id, { key: encodeKey(entry.key), value: encodeValue(entry), ino: entry.key.ino, entry });
    }
    const previous = this.reconcileFollowed(desired);
    // Deletes first: a full map must make room for what replaces the entries that go. The
    // bitmap is written once at the end, exact for what the map then holds (until then it is
    // a superset for the deleted entries, and the added ones wait for their bits).
    for (const [id, have] of this.current) {
      if (desired.has(id)) continue;
      const rc = this.lib.bpf_map_delete_elem(this.fds.watch, have.key) as number;
      if (rc < 0 && rc !== -2 /* ENOENT */) check(rc, "deleting from the watch map", { object: id });
      this.current.delete(id);
    }
    const notWatched: WatchEntry[] = [];
    for (const [id, want] of desired) {
      const have = this.current.get(id);
      if (have?.value.equals(want.value)) continue;
      const rc = this.lib.bpf_map_update_elem(this.fds.watch, want.key, want.value, 0) as number;
      if (rc === -7 /* E2BIG: the map is full */) {
        notWatched.push(want.entry);
        continue;
      }
      check(rc, "updating the watch map", { object: id });
      this.current.set(id, want);
    }
    this.writeBitmap(previous);
    if (notWatched.length !== this.notWatched) {
      if (notWatched.length > 0)
        this.logger?.warn("the kernel watch map is full: files not watched", {
          notWatched: notWatched.length,
          capacity: this.capacity,
          hint: "watch fewer files, or raise the capacity (--watch-capacity)",
        });
      else if (this.notWatched > 0)
        this.logger?.info("the kernel watch map has room again: every file watched");
    }
    this.notWatched = notWatched.length;
    return { notWatched };
  }

  /**
   * Entries the kernel armed itself (a file renamed over a trapped one: HIVE_KIND_FOLLOWED, listed
   * in hive_followed) until user space re-resolved the path: each goes now unless this sync wants
   * that file (then the sync writes user space's entry over it). Returns the bitmap as it may be in
   * the kernel: the words of those entries' bits are written again.
   */
  private reconcileFollowed(desired: ReadonlyMap<string, unknown>): BigUint64Array {
    const previous = this.bitmap.slice();
    if (this.fds.followed === undefined) return previous;
    const keys: Buffer[] = [];
    forEachMapEntry(this.fds.followed, KEY_LAYOUT.size, 4, (key) => keys.push(Buffer.from(key)));
    for (const key of keys) {
      this.lib.bpf_map_delete_elem(this.fds.followed, key);
      const fileKey = decodeKey(key);
      const id = fileKeyId(fileKey);
      const word = Number((fileKey.ino & BITMAP_MASK) >> 6n);
      previous[word] = ~(this.bitmap[word] ?? 0n); // differs: rewritten
      if (this.current.has(id) || desired.has(id)) continue;
      const rc = this.lib.bpf_map_delete_elem(this.fds.watch, key) as number;
      if (rc < 0 && rc !== -2 /* ENOENT */) check(rc, "deleting a followed entry", { object: id });
    }
    return previous;
  }

  /** Makes the bitmap exact for the map's entries, writing only the words that differ from `previous`. */
  private writeBitmap(previous: BigUint64Array): void {
    this.bitmap = bitmapOf([...this.current.values()].map((s) => s.ino));
    const key = Buffer.alloc(4);
    const value = Buffer.alloc(8);
    for (let word = 0; word < BITMAP_WORDS; word++) {
      const bits = this.bitmap[word] ?? 0n;
      if (bits === previous[word]) continue;
      key.writeUInt32LE(word);
      value.writeBigUInt64LE(bits);
      check(this.lib.bpf_map_update_elem(this.fds.bitmap, key, value, 0) as number, "updating the bitmap");
    }
  }
}
