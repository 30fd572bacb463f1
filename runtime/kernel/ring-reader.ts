/**
 * A BPF ring-buffer consumer over the map's own memory: the consumer page (read-write)
 * and the producer page + data (read-only) are mmap'ed once, and records are read in place
 * — no FFI call per event,
 * which under emulation made libbpf's per-record callback the bottleneck. Protocol as in
 * the kernel (kernel/bpf/ringbuf.c) and libbpf's ringbuf.c: 8-byte header (length with
 * BUSY and DISCARD bits, page offset), records 8-byte aligned, positions are u64 counters.
 *
 * Reading and releasing are apart: `consume` moves a private read position, and the space
 * goes back to the kernel only at `release` — once what was read is in the alert spool — so
 * a process killed in between leaves the records for the next reader (at-least-once).
 */
import koffi from "koffi";
import { HiveError } from "../../api/errors.ts";
import { errnoName, libbpf, libcFns } from "./libbpf-ffi.ts";

const BUSY_BIT = 0x80000000;
const DISCARD_BIT = 0x40000000;
const HEADER_SIZE = 8;
const PROT_READ = 1;
const PROT_WRITE = 2;
const MAP_SHARED = 1;
const POLLIN = 1;
const SC_PAGESIZE = 30;
const MAP_FAILED = 0xffffffffffffffffn;

export class RingReader {
  private readonly libc = libcFns();
  private readonly consumerPtr: bigint;
  private readonly producerPtr: bigint;
  private readonly consumer: BigUint64Array;
  private readonly producer: BigUint64Array;
  private readonly data: Buffer;
  private readonly dataView: DataView;
  private readonly pageSize: number;
  private readonly size: number;
  private readonly mask: bigint;
  private readonly pollFd = Buffer.alloc(8);
  /** A record that wraps past the data's end, joined (reused: `onRecord` must copy what it keeps). */
  private readonly scratch: { bytes: Buffer } = { bytes: Buffer.alloc(0) };
  /** Where the record being handed over is (reused for every record). */
  private readonly located: RecordPlace = { bytes: Buffer.alloc(0), offset: 0 };
  /** Where the next record is read; at or past the released (consumer) position. */
  private readPos: bigint;
  readonly fd: number;

  constructor(fd: number) {
    this.fd = fd;
    this.pageSize = Number(this.libc.sysconf(SC_PAGESIZE));
    this.size = ringSize(fd);
    this.mask = BigInt(this.size - 1);
    this.consumerPtr = this.map(this.pageSize, PROT_READ | PROT_WRITE, 0);
    this.producerPtr = this.map(this.pageSize + this.size, PROT_READ, this.pageSize);
    this.consumer = new BigUint64Array(koffi.view(this.consumerPtr, 8));
    this.producer = new BigUint64Array(koffi.view(this.producerPtr, 8));
    const data = koffi.view(this.producerPtr + BigInt(this.pageSize), this.size);
    this.data = Buffer.from(data);
    this.dataView = new DataView(data);
    this.pollFd.writeInt32LE(fd, 0);
    this.pollFd.writeInt16LE(POLLIN, 4);
    this.readPos = Atomics.load(this.consumer, 0);
  }

  /** The ring position after the last record read (what `release` takes). */
  get position(): bigint {
    return this.readPos;
  }

  /**
   * True while records read are not given back yet. The kernel then reports the ring readable
   * (its consumer position lags the producer's), so poll(2) returns at once: do not wait on it.
   */
  hasUnreleased(): boolean {
    return this.readPos > Atomics.load(this.consumer, 0);
  }

  /** Bytes the kernel has produced past what this reader has read. */
  unreadBytes(): number {
    return Number(Atomics.load(this.producer, 0) - this.readPos);
  }

  /** Bytes of the ring the kernel cannot write to: committed or reserved, not yet released. */
  usedBytes(): number {
    return Number(Atomics.load(this.producer, 0) - Atomics.load(this.consumer, 0));
  }

  /** Gives the space up to `pos` back to the kernel; never past what was read, never backwards. */
  release(pos: bigint): void {
    const target = pos > this.readPos ? this.readPos : pos;
    if (target > Atomics.load(this.consumer, 0)) Atomics.store(this.consumer, 0, target);
  }

  /** Starts reading at `pos` (records before it were handled by an earlier reader), releasing them. */
  skipTo(pos: bigint): void {
    if (pos <= this.readPos) return;
    const prod = Atomics.load(this.producer, 0);
    this.readPos = pos > prod ? prod : pos;
    this.release(this.readPos);
  }

  private map(length: number, prot: number, offset: number): bigint {
    const ptr = this.libc.mmap(null, length, prot, MAP_SHARED, this.fd, offset) as bigint;
    if (ptr === MAP_FAILED || ptr === 0n) {
      throw new HiveError("BpfCallFailed", `mmap of the ring buffer failed: ${errnoName(koffi.errno())}`, {
        object: "hive_events",
      });
    }
    return ptr;
  }

  /**
   * Calls `onRecord` for each committed record, at most `limit`; returns how many were read.
   * The record is `length` bytes of `bytes` from `offset`, valid during the call only (the ring's,
   * or a scratch reused for the next); `at` is where its bytes start in the ring, counted from
   * `position` as the call began. Positions are u64 counters; within one call they move by
   * less than the ring's size, counted as a Number (no BigInt per record).
   */
  consume(
    onRecord: (bytes: Buffer, offset: number, length: number, at: number) => void,
    limit = Number.POSITIVE_INFINITY,
  ): number {
    const start = this.readPos;
    const first = Number(start & this.mask);
    let available = Number(Atomics.load(this.producer, 0) - start); // acquire: records before it are visible
    let read = 0;
    let count = 0;
    try {
      while (count < limit) {
        if (read >= available) {
          available = Number(Atomics.load(this.producer, 0) - start);
          if (read >= available) break;
        }
        const offset = (first + read) % this.size;
        const header = this.dataView.getUint32(offset, true);
        if (header & BUSY_BIT) break; // reserved, not yet committed
        const length = header & ~(BUSY_BIT | DISCARD_BIT);
        if (!(header & DISCARD_BIT)) {
          const at = locateRecord(this.data, offset + HEADER_SIZE, length, this.scratch, this.located);
          onRecord(at.bytes, at.offset, length, read + HEADER_SIZE);
          count++;
        }
        read += (length + HEADER_SIZE + 7) & ~7;
      }
    } finally {
      this.readPos = start + BigInt(read);
    }
    return count;
  }

  /**
   * Copies the `length` ring bytes from position `from` (read, not yet released) into `target`
   * at `offset`: one copy, or two where they wrap past the data's end.
   */
  copyOut(from: bigint, length: number, target: Uint8Array, offset: number): void {
    if (from < Atomics.load(this.consumer, 0) || from + BigInt(length) > this.readPos)
      throw new RangeError("copy of ring bytes outside what was read and not released");
    copyRingBytes(this.data, Number(from & this.mask), length, target, offset);
  }

  /**
   * Resolves once the kernel signals new data, or after `timeoutMs`: poll(2) waits on libuv's
   * thread pool, so the event loop goes on meanwhile. A failed poll rejects (the consumer
   * replaces its drain); its errno stays on the pool's thread, so only the return code is known.
   */
  readable(timeoutMs: number): Promise<void> {
    return new Promise((resolve, reject) => {
      this.libc.poll.async(this.pollFd, 1, timeoutMs, (error: unknown, rc: number) => {
        if (error) reject(error);
        else if (rc < 0) {
          reject(
            new HiveError("BpfCallFailed", `poll on the ring buffer returned ${rc}`, {
              object: "hive_events",
            }),
          );
        } else resolve();
      });
    });
  }

  close(): void {
    this.libc.munmap(this.consumerPtr, this.pageSize);
    this.libc.munmap(this.producerPtr, this.pageSize + this.size);
  }
}

/** Where a record's bytes are: `bytes` from `offset`. */
export interface RecordPlace {
  bytes: Buffer;
  offset: number;
}

/**
 * Where the `length` bytes at offset `start` of a ring's data mapped once are (`start` may be at
 * or past the end: the data continues at 0), written to `out`. In place when whole; a record
 * that wraps is joined from the end and the start into `scratch` (grown as needed, reused by the next).
 */
export function locateRecord(
  data: Buffer,
  start: number,
  length: number,
  scratch: { bytes: Buffer },
  out: RecordPlace,
): RecordPlace {
  const size = data.length;
  const from = start % size;
  if (from + length <= size) {
    out.bytes = data;
    out.offset = from;
    return out;
  }
  if (scratch.bytes.length < length) scratch.bytes = Buffer.alloc(length);
  const head = size - from;
  data.copy(scratch.bytes, 0, from, size);
  data.copy(scratch.bytes, head, 0, length - head);
  out.bytes = scratch.bytes;
  out.offset = 0;
  return out;
}

/**
 * Copies `length` bytes of a ring's data mapped once, from offset `start` (the data continues at
 * 0 past its end), into `target` at `offset`.
 */
export function copyRingBytes(
  data: Buffer,
  start: number,
  length: number,
  target: Uint8Array,
  offset: number,
): void {
  const head = Math.min(length, data.length - start);
  data.copy(target, offset, start, start + head);
  if (head < length) data.copy(target, offset + head, 0, length - head);
}

/** max_entries of a ring-buffer map = its data size in bytes (bpf_map_info.max_entries). */
function ringSize(fd: number): number {
  const info = Buffer.alloc(96);
  const len = [info.length];
  const rc = libbpf().bpf_obj_get_info_by_fd(fd, info, len) as number;
  if (rc < 0) throw new HiveError("BpfCallFailed", `reading ring buffer info failed: ${errnoName(rc)}`);
  return info.readUInt32LE(16);
}
