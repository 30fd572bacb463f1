/**
 * struct hive_event (bpf/hive.h), the record of one burst in the ring buffer: its layout, the
 * flood key built from it, and the burst times the ring worker reads (the rest is decoded by
 * event-decode.ts). Part of the layouts shared with bpf/hive.h (layout.ts), checked against
 * the object's BTF.
 */

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

/** The flood key's 16-bit halves, in struct hive_flood_key's order, as offsets in a hive_event. */
const FLOOD_KEY_HALVES = FLOOD_KEY_FIELDS.flatMap(([name, width]) =>
  Array.from({ length: width / 2 }, (_, i) => EVENT_LAYOUT[name] + 2 * i),
);
const floodKeyScratch = new Uint16Array(FLOOD_KEY_HALVES.length);

/**
 * The flood key of a raw hive_event: what the kernel held its burst under, as a string of the
 * key's 16-bit halves (floodKeyOfMapKey gives the same string for hive_flood's own keys). One
 * string made from a reused scratch: no hex, no Buffer per event.
 */
export function floodKeyOf(event: Buffer): string {
  for (let i = 0; i < FLOOD_KEY_HALVES.length; i++)
    floodKeyScratch[i] = event.readUInt16LE(FLOOD_KEY_HALVES[i] as number);
  return String.fromCharCode.apply(null, floodKeyScratch as unknown as number[]);
}

/** The flood key (as floodKeyOf) of one of hive_flood's keys (the trailing padding left out). */
export function floodKeyOfMapKey(mapKey: Buffer): string {
  for (let i = 0; i < FLOOD_KEY_HALVES.length; i++) floodKeyScratch[i] = mapKey.readUInt16LE(2 * i);
  return String.fromCharCode.apply(null, floodKeyScratch as unknown as number[]);
}

/** What identifies a burst (thread id + first-check time) and when it was last extended. */
export interface BurstTimes {
  pid: number;
  ktimeNs: bigint;
  lastNs: bigint;
}

/**
 * A record's thread id and first-check time, read in place for the ring worker's deduplication
 * (once per record: no object, and one DataView per mapped buffer, not per record).
 */
export class BurstIdentity {
  pid = 0;
  ktimeNs = 0n;
  private view: DataView<ArrayBufferLike> = new DataView(new ArrayBuffer(0));

  read(record: Uint8Array): this {
    if (this.view.buffer !== record.buffer) this.view = new DataView(record.buffer);
    this.pid = this.view.getUint32(record.byteOffset + EVENT_LAYOUT.pid, true);
    this.ktimeNs = this.view.getBigUint64(record.byteOffset + EVENT_LAYOUT.ktime_ns, true);
    return this;
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
