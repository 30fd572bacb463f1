/**
 * The spool's segments and the bytes they hold: which segments exist (oldest first), the
 * one each destination appends to, rolling to a new one, deleting one, reading a record
 * back and recording its acknowledgement.
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
 */
import { openSync, readSync } from "node:fs";
import { join } from "node:path";
import { HiveError } from "../../../api/errors.ts";
import { AppendFile, type SpoolFiles } from "./spool-file.ts";
import { decodeFramedBody, frameAck, HEADER_BYTES, segmentFileName } from "./spool-format.ts";
import type { RecoveredSegment, SpoolRef } from "./spool-recovery.ts";

/** `segment` of a record not written yet (compares greater than every real segment). */
export const UNASSIGNED = Number.MAX_SAFE_INTEGER;

/** A segment dropped to stay in a bound: its records not acknowledged yet are lost. */
export interface SegmentDrop {
  segment: number;
  /** The destination (streamOf) whose records it held. */
  stream: string;
  undelivered: number;
  reason: "spool_full" | "destination_quota";
}

export interface Segment {
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

export interface SegmentHooks {
  /** fdatasync after every write (fsyncIntervalMs 0): the directory is synced after a deletion too. */
  syncEachWrite: boolean;
  /** A segment was dropped to stay in a bound. */
  onDrop?: (drop: SegmentDrop) => void;
  /** A segment was deleted: its files are gone and its bytes freed. */
  onRemoved: (seg: Segment) => void;
}

export class SpoolSegments {
  /** Insertion order = oldest first. */
  readonly all = new Map<number, Segment>();
  /** The segment each stream appends to. */
  readonly currents = new Map<string, Segment>();
  /** Bytes each stream holds (its segments and its records not written yet). */
  private readonly streamBytes = new Map<string, number>();
  /** Bytes of the whole spool, records not written yet included. */
  totalBytes = 0;
  /** Records not acknowledged yet, written or not. */
  pending = 0;

  private nextSegment: number;
  private readonly dir: string;
  private readonly files: SpoolFiles;
  private readonly hooks: SegmentHooks;

  constructor(dir: string, files: SpoolFiles, nextSegment: number, hooks: SegmentHooks) {
    this.dir = dir;
    this.files = files;
    this.nextSegment = nextSegment;
    this.hooks = hooks;
  }

  private path(n: number, ext: "log" | "ack"): string {
    return join(this.dir, segmentFileName(n, ext));
  }

  addBytes(stream: string, bytes: number): void {
    this.totalBytes += bytes;
    const now = (this.streamBytes.get(stream) ?? 0) + bytes;
    if (now <= 0) this.streamBytes.delete(stream);
    else this.streamBytes.set(stream, now);
  }

  private bytesOf(stream: string): number {
    return this.streamBytes.get(stream) ?? 0;
  }

  private make(n: number, stream: string): Segment {
    const seg: Segment = {
      n,
      stream,
      log: new AppendFile(this.path(n, "log"), this.files),
      ack: new AppendFile(this.path(n, "ack"), this.files),
      logBytes: 0,
      ackBytes: 0,
      records: 0,
      acked: new Set(),
      tail: undefined,
      readFd: undefined,
    };
    this.all.set(n, seg);
    return seg;
  }

  /** Takes over a segment found at open (deleted at once when all its records are acknowledged). */
  adopt(found: RecoveredSegment): void {
    const seg = this.make(found.n, found.stream);
    Object.assign(seg, {
      logBytes: found.logBytes,
      ackBytes: found.ackBytes,
      records: found.records,
      acked: found.acked,
    });
    this.addBytes(seg.stream, seg.logBytes + seg.ackBytes);
    this.pending += seg.records - seg.acked.size;
    if (seg.acked.size === seg.records) this.remove(seg);
  }

  private closeFiles(seg: Segment): void {
    seg.log.close();
    seg.ack.close();
    if (seg.readFd !== undefined) this.files.close(seg.readFd);
    seg.readFd = undefined;
  }

  remove(seg: Segment): void {
    this.closeFiles(seg);
    this.files.remove(this.path(seg.n, "log"));
    this.files.remove(this.path(seg.n, "ack"));
    this.addBytes(seg.stream, -(seg.logBytes + seg.ackBytes));
    this.pending -= seg.records - seg.acked.size;
    this.all.delete(seg.n);
    if (this.currents.get(seg.stream) === seg) this.currents.delete(seg.stream);
    if (this.hooks.syncEachWrite) this.files.syncDirectory(false);
    this.hooks.onRemoved(seg);
  }

  /** The segment `stream` appends to next: a new one when it has none or it is full. */
  currentFor(stream: string, segmentBytes: number): Segment {
    const cur = this.currents.get(stream);
    return !cur || cur.logBytes >= segmentBytes ? this.roll(stream) : cur;
  }

  /** A new current segment of `stream`; the previous one keeps only what it still has to write. */
  private roll(stream: string): Segment {
    const previous = this.currents.get(stream);
    const seg = this.make(this.nextSegment++, stream);
    this.currents.set(stream, seg);
    if (previous && previous.log.queued === 0) {
      previous.log.close();
      if (previous.acked.size === previous.records) this.remove(previous);
    }
    return seg;
  }

  /** Drops whole segments until `bytes` more of `stream` fit both bounds (see the header). */
  makeRoom(stream: string, bytes: number, maxBytes: number, quotaBytes: number): void {
    while (this.totalBytes + bytes > maxBytes) {
      // The destination holding the most gives up its oldest segment.
      let largest: string | undefined;
      for (const seg of this.all.values()) {
        if (largest === undefined || this.bytesOf(seg.stream) > this.bytesOf(largest)) largest = seg.stream;
      }
      if (largest === undefined || !this.dropOldestOf(largest, "spool_full")) break;
    }
    while (this.bytesOf(stream) + bytes > quotaBytes) {
      if (!this.dropOldestOf(stream, "destination_quota")) break;
    }
  }

  /** Drops the oldest segment of `stream` (the current one last); false when it has none. */
  private dropOldestOf(stream: string, reason: SegmentDrop["reason"]): boolean {
    for (const seg of this.all.values()) {
      if (seg.stream !== stream) continue;
      const undelivered = seg.records - seg.acked.size;
      this.remove(seg);
      this.hooks.onDrop?.({ segment: seg.n, stream, undelivered, reason });
      return true;
    }
    return false;
  }

  /** The segment holding a written record not acknowledged yet; undefined when it is gone. */
  private holding(ref: SpoolRef): Segment | undefined {
    const seg = this.all.get(ref.segment);
    if (!seg || seg.acked.has(ref.index) || ref.index < 0 || ref.index >= seg.records) return undefined;
    return seg;
  }

  /** A written record's body, read back from disk (Spool.read says what it throws). */
  read(ref: SpoolRef): string | undefined {
    const seg = this.holding(ref);
    if (!seg) return undefined;
    const file = segmentFileName(seg.n, "log");
    const buf = Buffer.allocUnsafe(HEADER_BYTES + ref.length);
    let got = 0;
    try {
      seg.readFd ??= openSync(this.path(seg.n, "log"), "r");
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
  }

  /**
   * Acknowledges a written record; true when an acknowledgement waits to be written.
   * `keepCurrent`: a fully delivered current segment is kept (no file churn per alert).
   */
  ack(ref: SpoolRef, keepCurrent: boolean): boolean {
    const seg = this.holding(ref);
    if (!seg) return false;
    seg.acked.add(ref.index);
    this.pending--;
    // Fully delivered: delete instead of recording the last ack.
    if (seg.acked.size === seg.records && (this.currents.get(seg.stream) !== seg || !keepCurrent)) {
      this.remove(seg);
      return false;
    }
    const framed = frameAck(ref.index);
    seg.ack.push(framed);
    seg.ackBytes += framed.length;
    this.addBytes(seg.stream, framed.length);
    return true;
  }

  syncAll(background: boolean): void {
    for (const seg of this.all.values()) {
      seg.log.sync(background);
      seg.ack.sync(background);
    }
    this.files.syncDirectory(background);
  }

  /** Deletes current segments with nothing left to deliver and closes every file. */
  close(): void {
    for (const seg of [...this.currents.values()])
      if (seg.records === seg.acked.size && seg.log.queued === 0) this.remove(seg);
    for (const seg of this.all.values()) this.closeFiles(seg);
    this.files.syncDirectory(false);
    this.files.closeDirectory();
  }
}
