/**
 * The durable spool: every alert waiting for delivery is on disk until its callback
 * acknowledges it, so an agent restart (or crash) delivers it afterwards.
 *
 * Layout: a directory of numbered segments. `seg-<n>.log` holds alert records, appended
 * only; `seg-<n>.ack` holds the record numbers of that segment already delivered (or given
 * up). A segment whose records are all acknowledged is deleted. After a restart a new
 * segment is started; old segments are only read and acknowledged.
 *
 * Framing (every record in both files), little-endian:
 *   magic "HV" (2 bytes) · version 1 (1) · type (1: alert, 2: ack) · payload length (4) · CRC-32 of payload (4) · payload
 * An incomplete or checksum-failing record at the very end of a file is a torn write (the
 * process or machine died mid-append): it is ignored with a warning. A bad record anywhere
 * else means the file is corrupt: the records before it are kept, the rest is skipped, and
 * an error is logged and counted; the agent goes on.
 *
 * Bound: the files together never exceed `maxBytes`. To make room the oldest segment is
 * dropped whole; its alerts not yet delivered are reported to `onDrop` (counted as
 * spool_full), never silently lost. Segments are `segmentBytes` each, so the drop
 * granularity is one segment (maxBytes / 16 by default).
 *
 * Durability: appends are written (write(2)) at the end of the current event-loop turn,
 * which survives a crash of the agent process; fdatasync runs every `fsyncIntervalMs` on
 * the thread pool (default 1 s; 0 = after every write), which bounds what a machine crash can lose.
 */
import {
  closeSync,
  fdatasync,
  fdatasyncSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  statSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { join } from "node:path";
import { crc32 } from "node:zlib";
import { HiveError } from "../errors.ts";
import type { Logger } from "../log.ts";
import { acquireSpoolLock } from "./spool-lock.ts";

export interface SpoolRecord {
  id: string;
  url: string;
  trapId: string;
  /** Wall-clock ms when the alert was produced (delivery latency survives restarts). */
  createdMs: number;
  /** The alert, serialised. */
  body: string;
}

export interface SpoolRef {
  segment: number;
  index: number;
  /** Byte offset and length of the record's payload in its segment file (for read-back). */
  offset: number;
  length: number;
}

/** Where an appended record went. */
export interface Spooled {
  ref: SpoolRef;
  /** Bytes the record occupies on disk. */
  bytes: number;
}

/** A recovered record: its body stays on disk until `read` (memory stays small after a long outage). */
export interface RecoveredRecord extends Omit<SpoolRecord, "body"> {
  ref: SpoolRef;
  bytes: number;
}

export interface SpoolOptions {
  dir: string;
  /** Upper bound of the spool's files together; default 64 MiB. */
  maxBytes?: number;
  /** Target segment size; default maxBytes / 16 (at least 4 KiB). */
  segmentBytes?: number;
  /** fdatasync period; 0 syncs after every write. Default 1000 ms. */
  fsyncIntervalMs?: number;
  logger: Logger;
  /** Called when a segment is dropped to stay under maxBytes, with its undelivered records. */
  onDrop?: (segment: number, undelivered: number) => void;
  /** Called once per corrupt file found at open. */
  onCorrupt?: (file: string) => void;
}

export interface Spool {
  /** Undelivered records found at open, oldest first (bodies left on disk: use `read`). */
  readonly recovered: readonly RecoveredRecord[];
  /** Appends a record; undefined when the record alone is larger than the spool may hold. */
  append(record: SpoolRecord): Spooled | undefined;
  /**
   * The body of a spooled record, read back from disk (checksum verified). Undefined when
   * the record is gone (acknowledged, or dropped by the bound); throws a SpoolCorrupt
   * HiveError when the bytes on disk no longer match.
   */
  read(ref: SpoolRef): string | undefined;
  ack(ref: SpoolRef): void;
  /** `writeError`: why the last write to disk failed, until a later write succeeds. */
  stats(): { bytes: number; pending: number; segments: number; writeError?: string };
  /** Writes buffered appends and acks, then fdatasyncs. */
  flush(): void;
  close(): void;
}

const MAGIC0 = 0x48; // "H"
const MAGIC1 = 0x56; // "V"
const VERSION = 1;
const TYPE_ALERT = 1;
const TYPE_ACK = 2;
const HEADER_BYTES = 12;

function frame(type: number, payload: Buffer): Buffer {
  const out = Buffer.allocUnsafe(HEADER_BYTES + payload.length);
  out[0] = MAGIC0;
  out[1] = MAGIC1;
  out[2] = VERSION;
  out[3] = type;
  out.writeUInt32LE(payload.length, 4);
  out.writeUInt32LE(crc32(payload), 8);
  payload.copy(out, HEADER_BYTES);
  return out;
}

export type FrameScan =
  | { ok: true; payloads: Buffer[]; offsets: number[] }
  | { ok: false; payloads: Buffer[]; offsets: number[]; torn: boolean; offset: number; reason: string };

/** Reads framed records of one type; stops at the first bad one and says whether it is a torn tail. */
export function scanFrames(data: Buffer, type: number): FrameScan {
  const payloads: Buffer[] = [];
  const offsets: number[] = [];
  let offset = 0;
  while (offset < data.length) {
    const left = data.length - offset;
    if (left < HEADER_BYTES)
      return { ok: false, payloads, offsets, torn: true, offset, reason: "incomplete record header" };
    if (
      data[offset] !== MAGIC0 ||
      data[offset + 1] !== MAGIC1 ||
      data[offset + 2] !== VERSION ||
      data[offset + 3] !== type
    ) {
      return { ok: false, payloads, offsets, torn: false, offset, reason: "bad record header" };
    }
    const length = data.readUInt32LE(offset + 4);
    const end = offset + HEADER_BYTES + length;
    if (end > data.length)
      return {
        ok: false,
        payloads,
        offsets,
        torn: true,
        offset,
        reason: "record runs past the end of the file",
      };
    const payload = data.subarray(offset + HEADER_BYTES, end);
    if (crc32(payload) !== data.readUInt32LE(offset + 8)) {
      // A checksum failure on the last record is what a torn page write looks like.
      return { ok: false, payloads, offsets, torn: end === data.length, offset, reason: "checksum mismatch" };
    }
    payloads.push(payload);
    offsets.push(offset + HEADER_BYTES);
    offset = end;
  }
  return { ok: true, payloads, offsets };
}

/** An alert record, framed, written straight into one buffer (the hot path: no intermediate copies). */
function frameRecord(record: SpoolRecord): Buffer {
  const head = `${JSON.stringify({ i: record.id, u: record.url, t: record.trapId, c: record.createdMs })}\n`;
  const headBytes = Buffer.byteLength(head);
  const length = headBytes + Buffer.byteLength(record.body);
  const out = Buffer.allocUnsafe(HEADER_BYTES + length);
  out[0] = MAGIC0;
  out[1] = MAGIC1;
  out[2] = VERSION;
  out[3] = TYPE_ALERT;
  out.writeUInt32LE(length, 4);
  out.write(head, HEADER_BYTES, "utf8");
  out.write(record.body, HEADER_BYTES + headBytes, "utf8");
  out.writeUInt32LE(crc32(out.subarray(HEADER_BYTES)), 8);
  return out;
}

function decodeRecordSafe(payload: Buffer): SpoolRecord | undefined {
  try {
    return decodeRecord(payload);
  } catch {
    return undefined;
  }
}

function decodeRecord(payload: Buffer): SpoolRecord | undefined {
  const text = payload.toString("utf8");
  const nl = text.indexOf("\n");
  if (nl < 0) return undefined;
  const head = JSON.parse(text.slice(0, nl)) as { i?: unknown; u?: unknown; t?: unknown; c?: unknown };
  if (
    typeof head.i !== "string" ||
    typeof head.u !== "string" ||
    typeof head.t !== "string" ||
    typeof head.c !== "number"
  ) {
    return undefined;
  }
  return { id: head.i, url: head.u, trapId: head.t, createdMs: head.c, body: text.slice(nl + 1) };
}

interface Segment {
  n: number;
  logFd: number | undefined;
  ackFd: number | undefined;
  logBytes: number;
  ackBytes: number;
  records: number;
  acked: Set<number>;
  logBuf: Buffer[];
  ackBuf: Buffer[];
  dirty: boolean;
  /** Log bytes already written to the file (the rest is in logBuf). */
  flushed: number;
  readFd: number | undefined;
}

/** Segment `n` with nothing read, written or open yet. */
const emptySegment = (n: number): Segment => ({
  n,
  logFd: undefined,
  ackFd: undefined,
  logBytes: 0,
  ackBytes: 0,
  records: 0,
  acked: new Set(),
  logBuf: [],
  ackBuf: [],
  dirty: false,
  flushed: 0,
  readFd: undefined,
});

const SEGMENT_FILE = /^seg-(\d{1,16})\.log$/;
const name = (n: number, ext: "log" | "ack") => `seg-${String(n).padStart(16, "0")}.${ext}`;

export function openSpool(options: SpoolOptions): Spool {
  const { dir, logger } = options;
  const maxBytes = options.maxBytes ?? 64 * 1024 * 1024;
  const segmentBytes = Math.max(4096, options.segmentBytes ?? Math.floor(maxBytes / 16));
  const fsyncIntervalMs = options.fsyncIntervalMs ?? 1000;
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  } catch (error) {
    throw new HiveError("ConfigInvalid", "cannot create the alert spool directory", {
      object: dir,
      hint: "mount a writable hostPath at the spool directory, or disable the spool",
      cause: error,
    });
  }

  const releaseLock = acquireSpoolLock(dir);

  const segments = new Map<number, Segment>(); // insertion order = oldest first
  let current: Segment | undefined;
  let totalBytes = 0;
  let pending = 0;
  let flushScheduled = false;
  let closed = false;
  let writeError: string | undefined;
  const path = (n: number, ext: "log" | "ack") => join(dir, name(n, ext));

  // The periodic fdatasync runs on libuv's thread pool so a slow disk never stalls the
  // event loop (and with it delivery). An fd is not closed while such a sync is pending,
  // so its number cannot be reused under the sync.
  const syncing = new Map<number, number>();
  const closeAfterSync = new Set<number>();
  const closeFd = (fd: number) => {
    if (syncing.has(fd)) closeAfterSync.add(fd);
    else closeSync(fd);
  };
  const syncInBackground = (fd: number) => {
    if (syncing.has(fd)) return;
    syncing.set(fd, 1);
    fdatasync(fd, (error) => {
      syncing.delete(fd);
      if (closeAfterSync.delete(fd)) closeSync(fd);
      if (error) logger.warn("alert spool fdatasync failed", { error });
    });
  };

  const removeSegment = (seg: Segment) => {
    for (const fd of [seg.logFd, seg.ackFd, seg.readFd]) if (fd !== undefined) closeFd(fd);
    seg.logFd = undefined;
    seg.ackFd = undefined;
    seg.readFd = undefined;
    for (const ext of ["log", "ack"] as const) {
      try {
        unlinkSync(path(seg.n, ext));
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "ENOENT")
          logger.error("cannot delete a spool file", { file: name(seg.n, ext), error });
      }
    }
    totalBytes -= seg.logBytes + seg.ackBytes;
    pending -= seg.records - seg.acked.size;
    segments.delete(seg.n);
    if (current === seg) current = undefined;
  };

  // ---- recovery --------------------------------------------------------------------
  const recovered: RecoveredRecord[] = [];
  let nextSegment = 1;
  const found = readdirSync(dir)
    .map((f) => SEGMENT_FILE.exec(f))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => Number(m[1]))
    .sort((a, b) => a - b);
  for (const n of found) {
    nextSegment = Math.max(nextSegment, n + 1);
    const seg = emptySegment(n);
    let logData: Buffer;
    try {
      logData = readFileSync(path(n, "log"));
    } catch (error) {
      logger.error("cannot read a spool file; skipping it", { file: name(n, "log"), error });
      continue;
    }
    seg.logBytes = logData.length;
    seg.flushed = logData.length;
    const scan = scanFrames(logData, TYPE_ALERT);
    const records: (SpoolRecord | undefined)[] = [];
    let corrupt = !scan.ok && !scan.torn;
    for (const payload of scan.payloads) {
      const record = decodeRecordSafe(payload);
      if (!record) {
        corrupt = true;
        break;
      }
      records.push(record);
    }
    if (!scan.ok && scan.torn) {
      logger.warn("torn record at the end of a spool file ignored (the agent stopped mid-write)", {
        file: name(n, "log"),
        offset: scan.offset,
        reason: scan.reason,
      });
    }
    if (corrupt) {
      const error = new HiveError(
        "SpoolCorrupt",
        "alert spool file is corrupt; its readable records are kept, the rest is skipped",
        {
          object: name(n, "log"),
          hint: "the disk or another process damaged the spool; alerts in the damaged part cannot be delivered",
          offset: scan.ok ? undefined : scan.offset,
          reason: scan.ok ? "undecodable record" : scan.reason,
          kept: records.length,
        },
      );
      logger.error(error.message, { error });
      options.onCorrupt?.(name(n, "log"));
    }
    seg.records = records.length;
    try {
      const ackData = readFileSync(path(n, "ack"));
      seg.ackBytes = ackData.length;
      const acks = scanFrames(ackData, TYPE_ACK);
      if (!acks.ok && !acks.torn) {
        logger.error("alert spool acknowledgement file is corrupt; its alerts may be delivered twice", {
          error: new HiveError("SpoolCorrupt", "corrupt acknowledgement file", {
            object: name(n, "ack"),
            reason: acks.reason,
          }),
        });
        options.onCorrupt?.(name(n, "ack"));
      }
      for (const p of acks.payloads) if (p.length === 4) seg.acked.add(p.readUInt32LE(0));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT")
        logger.error("cannot read a spool acknowledgement file", { file: name(n, "ack"), error });
    }
    segments.set(n, seg);
    totalBytes += seg.logBytes + seg.ackBytes;
    for (const index of [...seg.acked]) if (index >= seg.records) seg.acked.delete(index);
    pending += seg.records - seg.acked.size;
    if (seg.acked.size === seg.records) {
      removeSegment(seg);
      continue;
    }
    records.forEach((record, index) => {
      const payload = scan.payloads[index] as Buffer;
      if (record && !seg.acked.has(index)) {
        recovered.push({
          id: record.id,
          url: record.url,
          trapId: record.trapId,
          createdMs: record.createdMs,
          ref: { segment: n, index, offset: scan.offsets[index] as number, length: payload.length },
          bytes: HEADER_BYTES + payload.length,
        });
      }
    });
  }
  if (recovered.length > 0)
    logger.info("alert spool recovered undelivered alerts", { alerts: recovered.length, bytes: totalBytes });

  // ---- writing ---------------------------------------------------------------------
  const fsyncTimer =
    fsyncIntervalMs > 0
      ? setInterval(() => {
          for (const seg of segments.values()) {
            if (!seg.dirty) continue;
            seg.dirty = false;
            for (const fd of [seg.logFd, seg.ackFd]) if (fd !== undefined) syncInBackground(fd);
          }
        }, fsyncIntervalMs)
      : undefined;
  fsyncTimer?.unref();

  const writeAll = (fd: number, chunks: Buffer[]) => {
    const buf = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
    let off = 0;
    while (off < buf.length) off += writeSync(fd, buf, off, buf.length - off);
  };

  const flushWrites = () => {
    flushScheduled = false;
    // Alert records first, then acknowledgements: an ack never reaches disk before its record.
    for (const seg of segments.values()) {
      if (seg.logBuf.length === 0) continue;
      seg.logFd ??= openSync(path(seg.n, "log"), "a", 0o600);
      writeAll(seg.logFd, seg.logBuf);
      seg.logBuf = [];
      seg.flushed = seg.logBytes;
      seg.dirty = true;
      if (fsyncIntervalMs === 0) fdatasyncSync(seg.logFd);
    }
    for (const seg of segments.values()) {
      if (seg.ackBuf.length === 0) continue;
      seg.ackFd ??= openSync(path(seg.n, "ack"), "a", 0o600);
      writeAll(seg.ackFd, seg.ackBuf);
      seg.ackBuf = [];
      seg.dirty = true;
      if (fsyncIntervalMs === 0) fdatasyncSync(seg.ackFd);
    }
  };
  const scheduleFlush = () => {
    if (flushScheduled || closed) return;
    flushScheduled = true;
    setImmediate(() => {
      if (!flushScheduled) return;
      try {
        flushWrites();
        writeError = undefined;
      } catch (error) {
        writeError = (error as Error).message;
        logger.error("cannot write the alert spool; undelivered alerts are held in memory only", {
          error: new HiveError("DeliveryFailed", "spool write failed", { object: dir, cause: error }),
        });
      }
    });
  };

  const newSegment = (): Segment => {
    if (current && current.logBuf.length > 0) flushWrites();
    if (current?.logFd !== undefined) {
      closeFd(current.logFd);
      current.logFd = undefined;
    }
    const previous = current;
    const seg = emptySegment(nextSegment++);
    segments.set(seg.n, seg);
    current = seg;
    if (previous && previous.acked.size === previous.records) removeSegment(previous);
    return seg;
  };

  return {
    recovered,
    append(record) {
      const framed = frameRecord(record);
      // Leave room for the acknowledgements: a record may use at most a quarter of the spool.
      if (framed.length > maxBytes / 4) return undefined;
      while (totalBytes + framed.length > maxBytes) {
        const oldest = segments.values().next().value as Segment | undefined;
        if (!oldest) break;
        if (oldest === current) {
          newSegment();
          continue;
        }
        const undelivered = oldest.records - oldest.acked.size;
        removeSegment(oldest);
        options.onDrop?.(oldest.n, undelivered);
      }
      let seg = current;
      if (!seg || seg.logBytes >= segmentBytes) seg = newSegment();
      const index = seg.records++;
      const offset = seg.logBytes + HEADER_BYTES;
      seg.logBuf.push(framed);
      seg.logBytes += framed.length;
      totalBytes += framed.length;
      pending++;
      scheduleFlush();
      return {
        ref: { segment: seg.n, index, offset, length: framed.length - HEADER_BYTES },
        bytes: framed.length,
      };
    },
    read(ref) {
      const seg = segments.get(ref.segment);
      if (!seg || seg.acked.has(ref.index) || ref.index >= seg.records) return undefined;
      if (ref.offset + ref.length > seg.flushed) flushWrites();
      const file = name(seg.n, "log");
      const buf = Buffer.allocUnsafe(HEADER_BYTES + ref.length);
      let got = 0;
      try {
        seg.readFd ??= openSync(path(seg.n, "log"), "r");
        while (got < buf.length) {
          const r = readSync(seg.readFd, buf, got, buf.length - got, ref.offset - HEADER_BYTES + got);
          if (r === 0) break;
          got += r;
        }
      } catch (error) {
        throw new HiveError("SpoolCorrupt", "cannot read an alert back from the spool", {
          object: file,
          cause: error,
        });
      }
      const scan = scanFrames(buf.subarray(0, got), TYPE_ALERT);
      const record = scan.payloads.length === 1 ? decodeRecordSafe(scan.payloads[0] as Buffer) : undefined;
      if (!record) {
        throw new HiveError("SpoolCorrupt", "an alert changed on disk after it was spooled", {
          object: file,
          hint: "the disk or another process damaged the spool; this alert cannot be delivered",
          offset: ref.offset,
        });
      }
      return record.body;
    },
    ack(ref) {
      const seg = segments.get(ref.segment);
      if (!seg || seg.acked.has(ref.index) || ref.index >= seg.records) return;
      seg.acked.add(ref.index);
      pending--;
      if (seg !== current && seg.acked.size === seg.records) {
        // Fully delivered: delete instead of recording the last ack.
        removeSegment(seg);
        return;
      }
      const payload = Buffer.allocUnsafe(4);
      payload.writeUInt32LE(ref.index, 0);
      const framed = frame(TYPE_ACK, payload);
      seg.ackBuf.push(framed);
      seg.ackBytes += framed.length;
      totalBytes += framed.length;
      scheduleFlush();
    },
    stats: () => ({
      bytes: totalBytes,
      pending,
      segments: segments.size,
      ...(writeError ? { writeError } : {}),
    }),
    flush() {
      flushWrites();
      for (const seg of segments.values()) {
        if (!seg.dirty) continue;
        seg.dirty = false;
        for (const fd of [seg.logFd, seg.ackFd]) if (fd !== undefined) fdatasyncSync(fd);
      }
    },
    close() {
      if (closed) return;
      this.flush();
      closed = true;
      clearInterval(fsyncTimer);
      for (const seg of segments.values()) {
        for (const fd of [seg.logFd, seg.ackFd, seg.readFd]) if (fd !== undefined) closeFd(fd);
        seg.logFd = undefined;
        seg.ackFd = undefined;
        seg.readFd = undefined;
      }
      if (current && current.records === current.acked.size) removeSegment(current);
      releaseLock();
    },
  };
}

/** Size of a spool directory's files (diagnostics and tests). */
export function spoolDiskBytes(dir: string): number {
  let total = 0;
  for (const f of readdirSync(dir)) if (/^seg-\d+\.(log|ack)$/.test(f)) total += statSync(join(dir, f)).size;
  return total;
}
