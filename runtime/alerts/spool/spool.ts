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
 * The pieces: segments, their per-destination streams and the bounds that drop them in
 * spool-segments.ts; writing to disk while it refuses writes, and fdatasync, in
 * spool-writer.ts; the files themselves in spool-file.ts; one agent per directory in
 * spool-lock.ts.
 */
import { mkdirSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { HiveError } from "../../../api/errors.ts";
import type { Logger } from "../../log.ts";
import { boundedMemo } from "./bounded-memo.ts";
import { SpoolFiles, type SpoolWriteError } from "./spool-file.ts";
import { decodeFramedBody, frameRecord, HEADER_BYTES, type SpoolRecord } from "./spool-format.ts";
import { acquireSpoolLock } from "./spool-lock.ts";
import { type RecoveredRecord, recoverSpool, type SpoolRef } from "./spool-recovery.ts";
import { type SegmentDrop, SpoolSegments, UNASSIGNED } from "./spool-segments.ts";
import { type SpoolSettings, spoolSettings } from "./spool-settings.ts";
import { SpoolWriter } from "./spool-writer.ts";

export type { SpoolRecord } from "./spool-format.ts";
export type { RecoveredRecord, SpoolRef } from "./spool-recovery.ts";
export type { SegmentDrop } from "./spool-segments.ts";

/** Where an appended record went. */
export interface Spooled {
  /** Filled in (segment, index, offset) once the record is written; the same object throughout. */
  ref: SpoolRef;
  /** Bytes the record occupies on disk. */
  bytes: number;
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
  /** Records neither written nor delivered (in memory only: a crash would lose them). */
  unwritten: number;
  /** The most bytes of records that may wait in memory (beyond it `append` refuses). */
  maxUnwrittenBytes: number;
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
   * From now on `append` takes records beyond `maxUnwrittenBytes` instead of refusing them: the
   * caller stops producing at that bound itself (the kernel ring's gate pauses reading), so what
   * comes beyond it is only what was already on its way.
   */
  softenMemoryLimit(): void;
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

/** Opens (creating it if need be) and locks the spool directory, and takes over what it holds. */
export function openSpool(options: SpoolOptions): Spool {
  const { dir, logger } = options;
  const settings = spoolSettings(options);
  createSpoolDir(dir);
  const releaseLock = acquireSpoolLock(dir);
  const files = new SpoolFiles(dir, logger);
  const recovery = recoverSpool(dir, logger, streamOf, options.onCorrupt);
  // Created after recovery: nothing waits to be written while recovered segments are taken over.
  let writer: SpoolWriter | undefined;
  const segments = new SpoolSegments(dir, files, recovery.nextSegment, {
    syncEachWrite: settings.fsyncIntervalMs === 0,
    ...(options.onDrop ? { onDrop: options.onDrop } : {}),
    onRemoved: (seg) => writer?.segmentRemoved(seg),
  });
  for (const found of recovery.segments) segments.adopt(found);
  if (recovery.recovered.length > 0)
    logger.info("alert spool recovered undelivered alerts", {
      alerts: recovery.recovered.length,
      bytes: segments.totalBytes,
    });
  writer = new SpoolWriter(segments, {
    dir,
    logger,
    segmentBytes: settings.segmentBytes,
    fsyncIntervalMs: settings.fsyncIntervalMs,
    maxUnwrittenBytes: settings.maxUnwrittenBytes,
    retryWriteMs: settings.retryWriteMs,
    ...(options.onWriteError ? { onWriteError: options.onWriteError } : {}),
  });
  return new SegmentedSpool({ dir, logger, settings, segments, writer, releaseLock }, recovery.recovered);
}

function createSpoolDir(dir: string): void {
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  } catch (error) {
    throw new HiveError("ConfigInvalid", "cannot create the alert spool directory", {
      object: dir,
      hint: "mount a writable hostPath at the spool directory, or disable the spool",
      cause: error,
    });
  }
}

/** What an open spool is made of. */
interface SpoolParts {
  dir: string;
  logger: Logger;
  settings: SpoolSettings;
  /** The segments on disk and their bounds. */
  segments: SpoolSegments;
  /** Records on their way to disk (held in memory meanwhile). */
  writer: SpoolWriter;
  releaseLock: () => void;
}

/** The Spool over its segments and writer: appends go through the writer, reads and acks to where the record is. */
class SegmentedSpool implements Spool {
  readonly maxBytes: number;
  readonly recovered: readonly RecoveredRecord[];
  private readonly parts: SpoolParts;
  private readonly streamOfUrl = boundedMemo(streamOf);
  private closed = false;
  private softLimit = false;

  constructor(parts: SpoolParts, recovered: readonly RecoveredRecord[]) {
    this.parts = parts;
    this.maxBytes = parts.settings.maxBytes;
    this.recovered = recovered;
  }

  softenMemoryLimit(): void {
    this.softLimit = true;
  }

  append(record: SpoolRecord): Spooled | SpoolRefusal {
    const { writer, segments, settings } = this.parts;
    if (this.closed) return { refused: "spool_unwritable" };
    const framed = frameRecord(record);
    // Leave room for the acknowledgements: a record may use at most a quarter of the spool.
    if (framed.length > settings.maxBytes / 4) return { refused: "too_large" };
    if (!writer.hasRoomFor(framed.length) && !this.softLimit) return { refused: "spool_unwritable" };
    const stream = this.streamOfUrl(record.url);
    segments.makeRoom(stream, framed.length, settings.maxBytes, settings.quotaBytes);
    const ref: SpoolRef = {
      segment: UNASSIGNED,
      index: -1,
      offset: -1,
      length: framed.length - HEADER_BYTES,
    };
    writer.hold(ref, framed, stream);
    return { ref, bytes: framed.length };
  }

  read(ref: SpoolRef): string | undefined {
    const framed = this.parts.writer.framedOf(ref);
    if (framed) return decodeFramedBody(framed);
    return this.parts.segments.read(ref);
  }

  ack(ref: SpoolRef): void {
    const { writer, segments } = this.parts;
    if (ref.segment === UNASSIGNED) writer.ackUnwritten(ref);
    else if (segments.ack(ref, writer.writeError === undefined) && writer.writeError === undefined)
      writer.schedule();
  }

  stats(): SpoolStats {
    const { writer, segments, settings } = this.parts;
    return {
      bytes: segments.totalBytes,
      pending: segments.pending,
      segments: segments.all.size,
      unwrittenBytes: writer.unassignedBytes,
      unwritten: writer.unwritten,
      maxUnwrittenBytes: settings.maxUnwrittenBytes,
      ...(writer.writeError !== undefined ? { writeError: writer.writeError } : {}),
    };
  }

  flush(): void {
    if (!this.parts.writer.flush()) return;
    try {
      this.parts.segments.syncAll(false);
    } catch (error) {
      this.parts.logger.warn("alert spool fdatasync failed", { error });
    }
  }

  close(): { unwritten: number } {
    if (this.closed) return { unwritten: 0 };
    const { writer, segments, logger, dir } = this.parts;
    this.flush();
    this.closed = true;
    writer.close();
    const unwritten = writer.unwritten;
    segments.close();
    this.parts.releaseLock();
    if (unwritten > 0) {
      logger.error("alerts the spool could not write are lost at shutdown", {
        error: new HiveError("DeliveryFailed", "spool not writable at shutdown", {
          object: dir,
          reason: writer.writeError,
          alerts: unwritten,
        }),
      });
    }
    return { unwritten };
  }
}

/** Size of a spool directory's files (diagnostics and tests). */
export function spoolDiskBytes(dir: string): number {
  let total = 0;
  for (const f of readdirSync(dir)) if (/^seg-\d+\.(log|ack)$/.test(f)) total += statSync(join(dir, f)).size;
  return total;
}
