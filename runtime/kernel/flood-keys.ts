/**
 * What user space keeps per flood key (flood-summaries.ts): the held counts it reported. Found
 * from a raw hive_event record or from one of hive_flood's keys by a hash of the key's words,
 * compared word by word: no key string, no lookup object.
 */
import { FLOOD_KEY_BYTES, floodKeyHash, floodKeyOf, hasFloodKey, type RecordBatch } from "./event-record.ts";

export interface FloodKeyState {
  /** The hive_flood key (its first FLOOD_KEY_BYTES), and a view of it for comparing. */
  readonly key: Buffer;
  readonly keyView: DataView;
  /** The cumulative held counts last reported (hive_flood's held_bursts, held_checks). */
  reportedBursts: bigint;
  reportedChecks: bigint;
  /** Whether an event or a summary reported counts of this key yet. */
  reported: boolean;
  /** Another key of the same hash. */
  next: FloodKeyState | undefined;
}

export class FloodKeys {
  private readonly byHash = new Map<number, FloodKeyState>();

  /** The state of the key of the record at `at` in `batch`, made when new. */
  ofRecord(batch: RecordBatch, at: number): FloodKeyState {
    const hash = floodKeyHash(batch.view, at);
    return (
      this.find(hash, (s) => hasFloodKey(batch.view, at, s.keyView)) ??
      this.add(hash, floodKeyOf(batch.bytes, at))
    );
  }

  /** The state of one of hive_flood's keys, made when new. */
  ofMapKey(mapKey: Buffer): FloodKeyState {
    const hash = floodKeyHash(viewOf(mapKey), 0, true);
    return this.find(hash, (s) => sameKey(s.key, mapKey)) ?? this.add(hash, mapKey);
  }

  /** The state of one of hive_flood's keys; undefined when none was made. */
  findMapKey(mapKey: Buffer): FloodKeyState | undefined {
    return this.find(floodKeyHash(viewOf(mapKey), 0, true), (s) => sameKey(s.key, mapKey));
  }

  /** Forgets the key of `mapKey`. */
  forget(mapKey: Buffer): void {
    const hash = floodKeyHash(viewOf(mapKey), 0, true);
    const gone = this.find(hash, (s) => sameKey(s.key, mapKey));
    if (!gone) return;
    const first = this.byHash.get(hash);
    if (first === gone) {
      if (gone.next) this.byHash.set(hash, gone.next);
      else this.byHash.delete(hash);
      return;
    }
    for (let s = first; s; s = s.next) if (s.next === gone) s.next = gone.next;
  }

  private find(hash: number, matches: (s: FloodKeyState) => boolean): FloodKeyState | undefined {
    for (let s = this.byHash.get(hash); s; s = s.next) if (matches(s)) return s;
    return undefined;
  }

  private add(hash: number, key: Buffer): FloodKeyState {
    const state = newState(Buffer.from(key.subarray(0, FLOOD_KEY_BYTES)), this.byHash.get(hash));
    this.byHash.set(hash, state);
    return state;
  }
}

function newState(key: Buffer, next: FloodKeyState | undefined): FloodKeyState {
  const keyView = viewOf(key);
  return { key, keyView, reportedBursts: 0n, reportedChecks: 0n, reported: false, next };
}

function viewOf(bytes: Buffer): DataView {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

function sameKey(key: Buffer, mapKey: Buffer): boolean {
  return key.compare(mapKey, 0, FLOOD_KEY_BYTES, 0, FLOOD_KEY_BYTES) === 0;
}
