/**
 * struct hive_event (bpf/hive.h), the record of one burst in the ring buffer: its layout, the
 * flood key built from it, and the burst times the ring drain reads (the rest is decoded by
 * event-decode.ts). Part of the layouts shared with bpf/hive.h (layout.ts), checked against
 * the object's BTF.
 */

/**
 * Raw hive_event records (a batch from the ring drain, or one record), with one DataView of
 * them made once: the records' numbers are read through it, their strings from `bytes`.
 */
export interface RecordBatch {
  readonly bytes: Buffer;
  readonly view: DataView;
  /** Where each record starts in `bytes`, in the order they were read. */
  readonly offsets: ArrayLike<number>;
}

/** A batch of the records at `offsets` of `bytes`; without offsets, records back to back. */
export function recordBatch(bytes: Buffer, offsets?: ArrayLike<number>): RecordBatch {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return { bytes, view, offsets: offsets ?? backToBack(Math.floor(bytes.byteLength / EVENT_LAYOUT.size)) };
}

/**
 * A batch as the ring drain hands it over (ring-batch.ts packs it): the records' bytes, padded to 4,
 * then one Int32 per record, where it starts, in the order read.
 */
export function packedBatch(buffer: ArrayBuffer, count: number): RecordBatch {
  const offsetsAt = buffer.byteLength - count * 4;
  return recordBatch(Buffer.from(buffer, 0, offsetsAt), new Int32Array(buffer, offsetsAt, count));
}

/** One record at 0: every single record (a decoded or retained event) shares it, read only. */
const ONE_RECORD: ArrayLike<number> = Object.freeze([0]);

function backToBack(count: number): ArrayLike<number> {
  if (count === 1) return ONE_RECORD;
  const offsets = new Int32Array(count);
  for (let i = 0; i < count; i++) offsets[i] = i * EVENT_LAYOUT.size;
  return offsets;
}

/** struct hive_event */
export const EVENT_LAYOUT = {
  size: 896,
  ktime_ns: 0,
  last_ns: 8,
  ino: 16,
  cgroup_id: 24,
  dev: 32,
  mask: 36,
  pid: 40,
  tgid: 44,
  uid: 48,
  gid: 52,
  slot: 56,
  count: 60,
  kind: 64,
  group: 68,
  comm: 72,
  commSize: 16,
  exec_ns: 88,
  grandparent_start_ns: 96,
  ppid: 104,
  ns_pid: 108,
  exe_flags: 112,
  parent_flags: 116,
  parent_comm: 120,
  exe: 136,
  parent_exe: 392,
  grandparent_pid: 648,
  relation: 652,
  exe_ino: 656,
  parent_exe_ino: 664,
  exe_dev: 672,
  parent_exe_dev: 676,
  root_dev: 680,
  cgroup_level: 684,
  held_bursts: 688,
  held_checks: 696,
  cgroup_name: 704,
  cgroup_parent: 800,
  cgroupNameSize: 96,
} as const;
/**
 * struct hive_flood_key, field by field with its width: each is the hive_event field of its name
 * (bpf/hive.h), so that the key of an event is built from the event (floodKeyOf), and a trailing
 * 4-byte _pad. FLOOD_KEY_LAYOUT (offsets) is derived from it.
 */
const FLOOD_KEY_FIELDS = [
  ["cgroup_id", 8],
  ["exe_ino", 8],
  ["parent_exe_ino", 8],
  ["exe_dev", 4],
  ["slot", 4],
  ["parent_exe_dev", 4],
  ["root_dev", 4],
  ["exe_flags", 4],
  ["parent_flags", 4],
  ["relation", 4],
] as const satisfies readonly (readonly [keyof typeof EVENT_LAYOUT, 4 | 8])[];
type FloodKeyField = (typeof FLOOD_KEY_FIELDS)[number][0];
const floodKeyOffsets = (): Record<FloodKeyField, number> & { size: number } => {
  let at = 0;
  const out: Record<string, number> = {};
  for (const [name, width] of FLOOD_KEY_FIELDS) {
    out[name] = at;
    at += width;
  }
  return { ...(out as Record<FloodKeyField, number>), size: at + 4 };
};
/** struct hive_flood_key (hive_flood's keys; its values: map-layouts.ts FLOOD_LAYOUT). */
export const FLOOD_KEY_LAYOUT = floodKeyOffsets();

/** The flood key's 32-bit words, in struct hive_flood_key's order, as offsets in a hive_event. */
const FLOOD_KEY_WORDS = FLOOD_KEY_FIELDS.flatMap(([name, width]) =>
  Array.from({ length: width / 4 }, (_, i) => EVENT_LAYOUT[name] + 4 * i),
);
/** Bytes of a hive_flood key that are the key (its trailing padding left out). */
export const FLOOD_KEY_BYTES = 4 * FLOOD_KEY_WORDS.length;

/**
 * A 30-bit hash of a flood key: of the hive_event record at `at` in `view`, or, with
 * `mapKey`, of one of hive_flood's own keys there. Equal keys hash equal in either layout.
 */
export function floodKeyHash(view: DataView, at: number, mapKey = false): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < FLOOD_KEY_WORDS.length; i++) {
    const word = view.getInt32(at + (mapKey ? 4 * i : (FLOOD_KEY_WORDS[i] as number)), true);
    h = Math.imul(h ^ word, 0x01000193);
  }
  // 30 bits: a small integer to V8, so a Map keyed by it neither boxes the key nor hashes a double.
  return h & 0x3fffffff;
}

/** True when the hive_event record at `at` in `view` has the hive_flood key `mapKey` (its first FLOOD_KEY_BYTES). */
export function hasFloodKey(view: DataView, at: number, mapKey: DataView): boolean {
  for (let i = 0; i < FLOOD_KEY_WORDS.length; i++)
    if (view.getInt32(at + (FLOOD_KEY_WORDS[i] as number), true) !== mapKey.getInt32(4 * i, true))
      return false;
  return true;
}

/** The hive_flood key of the hive_event record at `at` in `bytes` (its padding zero). */
export function floodKeyOf(bytes: Buffer, at = 0): Buffer {
  const key = Buffer.alloc(FLOOD_KEY_LAYOUT.size);
  for (let i = 0; i < FLOOD_KEY_WORDS.length; i++)
    key.writeUInt32LE(bytes.readUInt32LE(at + (FLOOD_KEY_WORDS[i] as number)), 4 * i);
  return key;
}

/** What identifies a burst (thread id + first-check time) and when it was last extended. */
export interface BurstTimes {
  pid: number;
  ktimeNs: bigint;
  lastNs: bigint;
}

/**
 * A record's thread id and first-check time, read in place for the ring drain's deduplication
 * (once per record: no object, no view per record, and the time as two words: a BigInt only
 * when something asks for it).
 */
export class BurstIdentity {
  pid = 0;
  private ktimeHigh = 0;
  private ktimeLow = 0;
  private readonly beforeHigh: number;
  private readonly beforeLow: number;
  private view: DataView<ArrayBufferLike> = new DataView(new ArrayBuffer(0));

  /** `adoptedBeforeNs`: what `openedBeforeAdoption` compares with. */
  constructor(adoptedBeforeNs = 0n) {
    this.beforeHigh = Number(adoptedBeforeNs >> 32n);
    this.beforeLow = Number(adoptedBeforeNs & 0xffffffffn);
  }

  read(bytes: Uint8Array, offset: number): this {
    if (this.view.buffer !== bytes.buffer) this.view = new DataView(bytes.buffer);
    const at = bytes.byteOffset + offset;
    this.pid = this.view.getUint32(at + EVENT_LAYOUT.pid, true);
    this.ktimeLow = this.view.getUint32(at + EVENT_LAYOUT.ktime_ns, true);
    this.ktimeHigh = this.view.getUint32(at + EVENT_LAYOUT.ktime_ns + 4, true);
    return this;
  }

  get ktimeNs(): bigint {
    return (BigInt(this.ktimeHigh) << 32n) | BigInt(this.ktimeLow);
  }

  /** True when the burst's first check was at the time whose high and low 32 bits are given. */
  openedAt(high: number, low: number): boolean {
    return this.ktimeHigh === high && this.ktimeLow === low;
  }

  /** True when the burst was opened before the agent adopted the ring (an earlier agent's backlog). */
  openedBeforeAdoption(): boolean {
    return (
      this.ktimeHigh < this.beforeHigh ||
      (this.ktimeHigh === this.beforeHigh && this.ktimeLow < this.beforeLow)
    );
  }
}

/** Reads only a record's burst identity and times (the sweep needs no more). */
export function decodeBurstTimes(buf: Uint8Array): BurstTimes {
  const view = new DataView(buf.buffer, buf.byteOffset, EVENT_LAYOUT.size);
  return {
    pid: view.getUint32(EVENT_LAYOUT.pid, true),
    ktimeNs: view.getBigUint64(EVENT_LAYOUT.ktime_ns, true),
    lastNs: view.getBigUint64(EVENT_LAYOUT.last_ns, true),
  };
}
