/**
 * The durable spool: every alert waiting for delivery is on disk until its callback
 * acknowledges it, so an agent restart (or crash) delivers it afterwards.
 *
 * Layout: a directory of numbered segments. `seg-<n>.log` holds alert records, appended
 * only; `seg-<n>.ack` holds the record numbers of that segment already delivered (or given
 * up). A segment whose records are all acknowledged is deleted. After a restart a new
 * segment is started; old segments are only read and acknowledged. The format is in
 * spool-format.ts, reading it back at start in spool-recovery.ts.
 *
 * Each destination (a callback URL's origin) has segments of its own — a stream — so that
 * acknowledging one destination's alerts frees whole segments whatever the others do.
 *
 * Bounds: the files together never exceed `maxBytes`, one destination's never exceed
 * `destinationQuotaBytes` (default: maxBytes). To make room a whole segment is dropped: the
 * destination's own oldest when it is over its quota (destination_quota), else the oldest
 * of the destination holding the most (spool_full) — so a dead callback filling the spool
 * loses its own alerts, never the smaller backlog of another. Undelivered alerts of a
 * dropped segment are reported to `onDrop`, never silently lost. Segments are
 * `segmentBytes` each, so the drop granularity is one segment (maxBytes / 16 by default).
 *
 * A disk that refuses writes (full, quota, I/O error) never corrupts the spool and never
 * throws out of `append`: a record gets its place in a segment only when its bytes are
 * written, a write cut short is continued exactly where it stopped, and records not yet
 * written wait in memory (bounded by `maxUnwrittenBytes`; beyond it `append` refuses with
 * `spool_unwritable`), readable and acknowledgeable from there. Writing is retried every
 * `retryWriteMs` and as soon as a deleted segment frees space. Each failed attempt is
 * reported to `onWriteError` with its reason.
 *
 * Durability: appends are written (write(2)) at the end of the current event-loop turn,
 * which survives a crash of the agent process; fdatasync runs every `fsyncIntervalMs` on
 * the thread pool (default 1 s; 0 = after every write), which bounds what a machine crash
 * can lose. The directory is fsynced the same way after a segment is created or deleted.
 */
import { mkdirSync, openSync, readdirSync, readSync, statSync } from "node:fs";
import { join } from "node:path";
import { HiveError } from "../errors.ts";
import type { Logger } from "../log.ts";
import { AppendFile, SpoolFiles, type SpoolWriteError, writeErrorReason } from "./spool-file.ts";
import {
  decodeFramedBody,
  frameAck,
  frameRecord,
  HEADER_BYTES,
  type SpoolRecord,
  segmentFileName,
} from "./spool-format.ts";
import { acquireSpoolLock } from "./spool-lock.ts";
import { type RecoveredRecord, recoverSpool, type SpoolRef } from "./spool-recovery.ts";

export type { SpoolRecord } from "./spool-format.ts";
export type { RecoveredRecord, SpoolRef } from "./spool-recovery.ts";

/** Where an appended record went. */
export interface Spooled {
  /** Filled in (segment, index, offset) once the record is written; the same object throughout. */
  ref: SpoolRef;
  /** Bytes the record occupies on disk. */
  bytes: number;
}

/** A segment dropped to stay in a bound: its records not acknowledged yet are lost. */
export interface SegmentDrop {
  segment: number;
  /** The destination (streamOf) whose records it held. */
  stream: string;
  undelivered: number;
  reason: "spool_full" | "destination_quota";
}

/** The stream (destination) a record belongs to: its callback URL's origin. */
export function streamOf(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return "invalid";
  }
}

/** Why `append` did not take a record (the dispatcher counts it as a drop with this reason). */
export interface SpoolRefusal {
  refused: "too_large" | "spool_unwritable";
}

export interface SpoolOptions {
  dir: string;
  /** Upper bound of the spool's files together; default 64 MiB. */
  maxBytes?: number;
  /** Target segment size; default maxBytes / 16 (at least 4 KiB). */
  segmentBytes?: number;
  /** fdatasync period; 0 syncs after every write. Default 1000 ms. */
  fsyncIntervalMs?: number;
  /** Records held in memory while the disk refuses writes; default 8 MiB, at most maxBytes / 4. */
  maxUnwrittenBytes?: number;
  /** How often writing is tried again after a failure; default 1000 ms. */
  retryWriteMs?: number;
  logger: Logger;
  /** Bytes one destination's segments may hold; default maxBytes (then only the fair share applies). */
  destinationQuotaBytes?: number;
  /** Called when a segment is dropped to stay in a bound, with its undelivered records. */
  onDrop?: (drop: SegmentDrop) => void;
  /** Called once per corrupt file found at open. */
  onCorrupt?: (file: string) => void;
  /** Called for each failed attempt to write the spool. */
  onWriteError?: (reason: SpoolWriteError) => void;
}

export interface SpoolStats {
  bytes: number;
  pending: number;
  segments: number;
  /** Bytes of records waiting in memory for the disk to take them. */
  unwrittenBytes: number;
  /** Why the last write to disk failed, until a later write succeeds. */
  writeError?: string;
}

export interface Spool {
  /** The bound of the spool's files together (bytes). */
  readonly maxBytes: number;
  /** Undelivered records found at open, oldest first (bodies left on disk: use `read`). */
  readonly recovered: readonly RecoveredRecord[];
  /** Takes a record (never throws); a refusal says why it was not taken. */
  append(record: SpoolRecord): Spooled | SpoolRefusal;
  /**
   * The body of a spooled record, from memory while it is not written yet, else read back
   * from disk (checksum verified). Undefined when the record is gone (acknowledged, or
   * dropped by the bound); throws a SpoolCorrupt HiveError when the bytes on disk no longer
   * match, a DeliveryFailed one when the disk cannot be read (worth retrying).
   */
  read(ref: SpoolRef): string | undefined;
  ack(ref: SpoolRef): void;
  stats(): SpoolStats;
  /** Writes what waits (never throws: a failure is in `stats().writeError`), then fdatasyncs. */
  flush(): void;
  /** Flushes and closes; returns how many records could not be written and are lost. */
  close(): { unwritten: number };
}

/** `segment` of a record not written yet (compares greater than every real segment). */
const UNASSIGNED = Number.MAX_SAFE_INTEGER;

interface Segment {
  n: number;
  stream: string;
  log: AppendFile;
  ack: AppendFile;
  logBytes: number;
  ackBytes: number;
  records: number;
  acked: Set<number>;
  /** The record whose write was cut short: its remainder is queued in `log`, its bytes in memory. */
  tail: SpoolRef | undefined;
  readFd: number | undefined;
}

export function openSpool(options: SpoolOptions): Spool {
  const { dir, logger } = options;
  const maxBytes = options.maxBytes ?? 64 * 1024 * 1024;
  const segmentBytes = Math.max(4096, options.segmentBytes ?? Math.floor(maxBytes / 16));
  const fsyncIntervalMs = options.fsyncIntervalMs ?? 1000;
  const maxUnwrittenBytes = Math.min(options.maxUnwrittenBytes ?? 8 * 1024 * 1024, maxBytes / 4);
  const retryWriteMs = options.retryWriteMs ?? 1000;
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
  const files = new SpoolFiles(dir, logger);
  const path = (n: number, ext: "log" | "ack") => join(dir, segmentFileName(n, ext));

  const quotaBytes = options.destinationQuotaBytes ?? maxBytes;
  const segments = new Map<number, Segment>(); // insertion order = oldest first
  /** The segment each stream appends to. */
  const currents = new Map<string, Segment>();
  /** Bytes each stream holds (its segments and its records not written yet). */
  const streamBytes = new Map<string, number>();
  const addBytes = (stream: string, bytes: number) => {
    totalBytes += bytes;
    const now = (streamBytes.get(stream) ?? 0) + bytes;
    if (now <= 0) streamBytes.delete(stream);
    else streamBytes.set(stream, now);
  };
  let totalBytes = 0;
  let pending = 0;
  /** Records not wholly on disk (not written yet, or cut short), by their ref. */
  const memory = new Map<SpoolRef, { framed: Buffer; stream: string }>();
  const urlStreams = new Map<string, string>();
  const streamOfUrl = (url: string) => {
    let stream = urlStreams.get(url);
    if (stream === undefined) {
      stream = streamOf(url);
      if (urlStreams.size > 10_000) urlStreams.clear();
      urlStreams.set(url, stream);
    }
    return stream;
  };
  /** Records not written yet, oldest first (entries whose ref left `memory` were acknowledged). */
  let queue: SpoolRef[] = [];
  let queueHead = 0;
  let ackedInQueue = 0;
  let unassignedBytes = 0;
  let flushScheduled = false;
  let closed = false;
  let writeError: string | undefined;
  let lastFailureMs = 0;
  let retryTimer: NodeJS.Timeout | undefined;

  const makeSegment = (n: number, stream: string): Segment => ({
    n,
    stream,
    log: new AppendFile(path(n, "log"), files),
    ack: new AppendFile(path(n, "ack"), files),
    logBytes: 0,
    ackBytes: 0,
    records: 0,
    acked: new Set(),
    tail: undefined,
    readFd: undefined,
  });

  const removeSegment = (seg: Segment) => {
    seg.log.close();
    seg.ack.close();
    if (seg.readFd !== undefined) files.close(seg.readFd);
    seg.readFd = undefined;
    files.remove(path(seg.n, "log"));
    files.remove(path(seg.n, "ack"));
    addBytes(seg.stream, -(seg.logBytes + seg.ackBytes));
    pending -= seg.records - seg.acked.size;
    if (seg.tail) memory.delete(seg.tail);
    segments.delete(seg.n);
    if (currents.get(seg.stream) === seg) currents.delete(seg.stream);
    if (fsyncIntervalMs === 0) files.syncDirectory(false);
    // Space was freed: what waits in memory may fit now.
    if (writeError !== undefined) scheduleFlush();
  };

  // ---- recovery --------------------------------------------------------------------
  const recovery = recoverSpool(dir, logger, streamOf, options.onCorrupt);
  let nextSegment = recovery.nextSegment;
  for (const found of recovery.segments) {
    const seg = makeSegment(found.n, found.stream);
    Object.assign(seg, {
      logBytes: found.logBytes,
      ackBytes: found.ackBytes,
      records: found.records,
      acked: found.acked,
    });
    segments.set(seg.n, seg);
    addBytes(seg.stream, seg.logBytes + seg.ackBytes);
    pending += seg.records - seg.acked.size;
    if (seg.acked.size === seg.records) removeSegment(seg);
  }
  const recovered = recovery.recovered;
  if (recovered.length > 0)
    logger.info("alert spool recovered undelivered alerts", { alerts: recovered.length, bytes: totalBytes });

  // ---- writing ---------------------------------------------------------------------
  const syncAll = (background: boolean) => {
    for (const seg of segments.values()) {
      seg.log.sync(background);
      seg.ack.sync(background);
    }
    files.syncDirectory(background);
  };
  const fsyncTimer =
    fsyncIntervalMs > 0
      ? setInterval(() => {
          try {
            syncAll(true);
          } catch (error) {
            logger.warn("alert spool fdatasync failed", { error });
          }
        }, fsyncIntervalMs)
      : undefined;
  fsyncTimer?.unref();

  /** A new current segment of `stream`; the previous one keeps only what it still has to write. */
  const roll = (stream: string): Segment => {
    const previous = currents.get(stream);
    const seg = makeSegment(nextSegment++, stream);
    segments.set(seg.n, seg);
    currents.set(stream, seg);
    if (previous && previous.log.queued === 0) {
      previous.log.close();
      if (previous.acked.size === previous.records) removeSegment(previous);
    }
    return seg;
  };

  const unassign = (ref: SpoolRef) => {
    ref.segment = UNASSIGNED;
    ref.index = -1;
    ref.offset = -1;
  };

  /** Writes alert records: first the rest of records cut short, then new ones, each at its place. */
  const flushLog = (): NodeJS.ErrnoException | undefined => {
    for (const seg of segments.values()) {
      if (seg.log.queued === 0) continue;
      const { error } = seg.log.drain();
      if (error) return error;
      if (seg.tail) memory.delete(seg.tail);
      seg.tail = undefined;
      if (currents.get(seg.stream) !== seg) seg.log.close();
    }
    // Order matters only within a stream: group what waits by stream, oldest first.
    const byStream = new Map<string, SpoolRef[]>();
    for (let i = queueHead; i < queue.length; i++) {
      const ref = queue[i] as SpoolRef;
      const held = memory.get(ref);
      if (!held) continue; // acknowledged before it was written: never written
      let list = byStream.get(held.stream);
      if (!list) {
        list = [];
        byStream.set(held.stream, list);
      }
      list.push(ref);
    }
    queue = [];
    queueHead = 0;
    ackedInQueue = 0;
    let failure: NodeJS.ErrnoException | undefined;
    for (const [stream, refs] of byStream) {
      if (failure) {
        queue.push(...refs);
        continue;
      }
      let next = 0;
      while (next < refs.length) {
        const cur = currents.get(stream);
        const seg = !cur || cur.logBytes >= segmentBytes ? roll(stream) : cur;
        const batchStart = seg.logBytes;
        const batch: SpoolRef[] = [];
        let room = segmentBytes - seg.logBytes;
        while (next < refs.length) {
          const ref = refs[next] as SpoolRef;
          const framed = (memory.get(ref) as { framed: Buffer }).framed;
          if (batch.length > 0 && framed.length > room) break;
          next++;
          ref.segment = seg.n;
          ref.index = seg.records++;
          ref.offset = seg.logBytes + HEADER_BYTES;
          seg.logBytes += framed.length;
          room -= framed.length;
          unassignedBytes -= framed.length;
          seg.log.push(framed);
          batch.push(ref);
        }
        const { written, error } = seg.log.drain();
        if (!error) {
          for (const ref of batch) memory.delete(ref);
          continue;
        }
        // Cut short: what reached the file stays, the record written in part is finished by
        // the next attempt, the records not begun get their place again later.
        failure = error;
        const onDisk = batchStart + written;
        const back: SpoolRef[] = [];
        let keep = 0;
        for (const ref of batch) {
          const begin = ref.offset - HEADER_BYTES;
          const end = begin + HEADER_BYTES + ref.length;
          if (end <= onDisk) memory.delete(ref);
          else if (begin < onDisk) {
            seg.tail = ref;
            keep = end - onDisk;
          } else back.push(ref);
        }
        seg.log.truncateQueue(keep);
        for (const ref of back) {
          seg.records--;
          seg.logBytes -= HEADER_BYTES + ref.length;
          unassignedBytes += HEADER_BYTES + ref.length;
          unassign(ref);
        }
        queue.push(...back, ...refs.slice(next));
        break;
      }
    }
    return failure;
  };

  const flushAcks = (): NodeJS.ErrnoException | undefined => {
    let first: NodeJS.ErrnoException | undefined;
    for (const seg of segments.values()) {
      if (seg.ack.queued === 0) continue;
      const { error } = seg.ack.drain();
      first ??= error;
    }
    return first;
  };

  /** One attempt to write everything waiting; true when it all reached the disk. */
  const runFlush = (): boolean => {
    flushScheduled = false;
    let error: unknown;
    try {
      // Alert records first, then acknowledgements.
      error = flushLog();
      error = flushAcks() ?? error;
      if (!error && fsyncIntervalMs === 0) syncAll(false);
    } catch (thrown) {
      error = thrown;
    }
    if (!error) {
      if (writeError !== undefined) logger.info("alert spool writable again", { dir });
      writeError = undefined;
      clearTimeout(retryTimer);
      retryTimer = undefined;
      return true;
    }
    const reason = writeErrorReason(error);
    options.onWriteError?.(reason);
    lastFailureMs = Date.now();
    if (writeError === undefined) {
      logger.error("cannot write the alert spool; alerts wait in memory until it can", {
        error: new HiveError("DeliveryFailed", "spool write failed", {
          object: dir,
          hint: "free space on the spool's disk (or fix its I/O errors); writing is retried",
          reason,
          cause: error,
        }),
        unwrittenBytes: unassignedBytes,
      });
    }
    writeError = (error as Error).message ?? String(error);
    if (!retryTimer && !closed) {
      retryTimer = setTimeout(() => {
        retryTimer = undefined;
        if (!closed) runFlush();
      }, retryWriteMs);
      retryTimer.unref();
    }
    return false;
  };

  const scheduleFlush = () => {
    if (flushScheduled || closed) return;
    flushScheduled = true;
    setImmediate(() => {
      if (flushScheduled && !closed) runFlush();
    });
  };

  const unwrittenCount = () => memory.size;

  /** Drops the oldest segment of `stream` (the current one last); false when it has none. */
  const dropOldestOf = (stream: string, reason: SegmentDrop["reason"]): boolean => {
    for (const seg of segments.values()) {
      if (seg.stream !== stream) continue;
      const undelivered = seg.records - seg.acked.size;
      removeSegment(seg);
      options.onDrop?.({ segment: seg.n, stream, undelivered, reason });
      return true;
    }
    return false;
  };

  return {
    maxBytes,
    recovered,
    append(record) {
      if (closed) return { refused: "spool_unwritable" };
      const framed = frameRecord(record);
      // Leave room for the acknowledgements: a record may use at most a quarter of the spool.
      if (framed.length > maxBytes / 4) return { refused: "too_large" };
      if (unassignedBytes + framed.length > maxUnwrittenBytes) {
        // A burst within one turn writes now; a failing disk is tried again at most every retryWriteMs.
        if (writeError === undefined || Date.now() - lastFailureMs >= retryWriteMs) runFlush();
        if (unassignedBytes + framed.length > maxUnwrittenBytes) return { refused: "spool_unwritable" };
      }
      const stream = streamOfUrl(record.url);
      while (totalBytes + framed.length > maxBytes) {
        // The destination holding the most gives up its oldest segment.
        let largest: string | undefined;
        for (const seg of segments.values()) {
          if (largest === undefined || (streamBytes.get(seg.stream) ?? 0) > (streamBytes.get(largest) ?? 0))
            largest = seg.stream;
        }
        if (largest === undefined || !dropOldestOf(largest, "spool_full")) break;
      }
      while ((streamBytes.get(stream) ?? 0) + framed.length > quotaBytes) {
        if (!dropOldestOf(stream, "destination_quota")) break;
      }
      const ref: SpoolRef = {
        segment: UNASSIGNED,
        index: -1,
        offset: -1,
        length: framed.length - HEADER_BYTES,
      };
      memory.set(ref, { framed, stream });
      queue.push(ref);
      unassignedBytes += framed.length;
      addBytes(stream, framed.length);
      pending++;
      if (writeError === undefined) scheduleFlush();
      return { ref, bytes: framed.length };
    },
    read(ref) {
      const held = memory.get(ref);
      if (held) return decodeFramedBody(held.framed);
      const seg = segments.get(ref.segment);
      if (!seg || seg.acked.has(ref.index) || ref.index < 0 || ref.index >= seg.records) return undefined;
      const file = segmentFileName(seg.n, "log");
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
        throw new HiveError("DeliveryFailed", "cannot read an alert back from the spool", {
          object: file,
          hint: "the spool's disk reports errors; the alert stays queued and reading is retried",
          cause: error,
        });
      }
      const body = decodeFramedBody(buf.subarray(0, got));
      if (body === undefined) {
        throw new HiveError("SpoolCorrupt", "an alert changed on disk after it was spooled", {
          object: file,
          hint: "the disk or another process damaged the spool; this alert cannot be delivered",
          offset: ref.offset,
        });
      }
      return body;
    },
    ack(ref) {
      if (ref.segment === UNASSIGNED) {
        const held = memory.get(ref);
        if (!held) return;
        // Delivered before the disk took it: it is never written.
        memory.delete(ref);
        unassignedBytes -= held.framed.length;
        addBytes(held.stream, -held.framed.length);
        pending--;
        if (++ackedInQueue > 1024 && ackedInQueue * 2 > queue.length - queueHead) {
          queue = queue.slice(queueHead).filter((r) => memory.has(r));
          queueHead = 0;
          ackedInQueue = 0;
        }
        return;
      }
      const seg = segments.get(ref.segment);
      if (!seg || seg.acked.has(ref.index) || ref.index < 0 || ref.index >= seg.records) return;
      seg.acked.add(ref.index);
      pending--;
      const done = seg.acked.size === seg.records;
      // Fully delivered: delete instead of recording the last ack. The current segment is
      // kept (no file churn per alert) unless the disk is failing and its space is needed.
      if (done && (currents.get(seg.stream) !== seg || writeError !== undefined)) {
        removeSegment(seg);
        return;
      }
      const framed = frameAck(ref.index);
      seg.ack.push(framed);
      seg.ackBytes += framed.length;
      addBytes(seg.stream, framed.length);
      if (writeError === undefined) scheduleFlush();
    },
    stats: () => ({
      bytes: totalBytes,
      pending,
      segments: segments.size,
      unwrittenBytes: unassignedBytes,
      ...(writeError !== undefined ? { writeError } : {}),
    }),
    flush() {
      if (!runFlush()) return;
      try {
        syncAll(false);
      } catch (error) {
        logger.warn("alert spool fdatasync failed", { error });
      }
    },
    close() {
      if (closed) return { unwritten: 0 };
      this.flush();
      closed = true;
      clearInterval(fsyncTimer);
      clearTimeout(retryTimer);
      const unwritten = unwrittenCount();
      for (const seg of [...currents.values()])
        if (seg.records === seg.acked.size && seg.log.queued === 0) removeSegment(seg);
      for (const seg of segments.values()) {
        seg.log.close();
        seg.ack.close();
        if (seg.readFd !== undefined) files.close(seg.readFd);
        seg.readFd = undefined;
      }
      files.syncDirectory(false);
      files.closeDirectory();
      releaseLock();
      if (unwritten > 0) {
        logger.error("alerts the spool could not write are lost at shutdown", {
          error: new HiveError("DeliveryFailed", "spool not writable at shutdown", {
            object: dir,
            reason: writeError,
            alerts: unwritten,
          }),
        });
      }
      return { unwritten };
    },
  };
}

/** Size of a spool directory's files (diagnostics and tests). */
export function spoolDiskBytes(dir: string): number {
  let total = 0;
  for (const f of readdirSync(dir)) if (/^seg-\d+\.(log|ack)$/.test(f)) total += statSync(join(dir, f)).size;
  return total;
}
