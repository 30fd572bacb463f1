/**
 * Writing the spool to disk: appended records wait in memory until written, then take
 * their place in their stream's current segment; acknowledgements follow.
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
import { HiveError } from "../../../api/errors.ts";
import type { Logger } from "../../log.ts";
import { type SpoolWriteError, writeErrorReason } from "./spool-file.ts";
import { HEADER_BYTES } from "./spool-format.ts";
import type { SpoolRef } from "./spool-recovery.ts";
import { type Segment, type SpoolSegments, UNASSIGNED } from "./spool-segments.ts";

export interface SpoolWriterOptions {
  dir: string;
  logger: Logger;
  segmentBytes: number;
  fsyncIntervalMs: number;
  maxUnwrittenBytes: number;
  retryWriteMs: number;
  onWriteError?: (reason: SpoolWriteError) => void;
}

interface Held {
  framed: Buffer;
  stream: string;
}

export class SpoolWriter {
  /** Records not wholly on disk (not written yet, or cut short), by their ref. */
  private readonly memory = new Map<SpoolRef, Held>();
  /** Records not written yet, oldest first (entries whose ref left `memory` were acknowledged). */
  private queue: SpoolRef[] = [];
  private queueHead = 0;
  private ackedInQueue = 0;
  /** Bytes of records waiting in memory for a place in a segment. */
  unassignedBytes = 0;
  /** Why the last write to disk failed, until a later write succeeds. */
  writeError: string | undefined;
  private lastFailureMs = 0;
  private flushScheduled = false;
  private closed = false;
  private retryTimer: NodeJS.Timeout | undefined;
  private readonly fsyncTimer: NodeJS.Timeout | undefined;

  private readonly segments: SpoolSegments;
  private readonly options: SpoolWriterOptions;

  constructor(segments: SpoolSegments, options: SpoolWriterOptions) {
    this.segments = segments;
    this.options = options;
    this.fsyncTimer =
      options.fsyncIntervalMs > 0
        ? setInterval(() => {
            try {
              segments.syncAll(true);
            } catch (error) {
              options.logger.warn("alert spool fdatasync failed", { error });
            }
          }, options.fsyncIntervalMs)
        : undefined;
    this.fsyncTimer?.unref();
  }

  /** Records not wholly on disk. */
  get unwritten(): number {
    return this.memory.size;
  }

  /** Whether `bytes` more may wait in memory; writes first when they would not. */
  hasRoomFor(bytes: number): boolean {
    const { maxUnwrittenBytes, retryWriteMs } = this.options;
    if (this.unassignedBytes + bytes <= maxUnwrittenBytes) return true;
    // A burst within one turn writes now; a failing disk is tried again at most every retryWriteMs.
    if (this.writeError === undefined || Date.now() - this.lastFailureMs >= retryWriteMs) this.flush();
    return this.unassignedBytes + bytes <= maxUnwrittenBytes;
  }

  /** Takes a record to write at the end of this turn (or when the disk takes writes again). */
  hold(ref: SpoolRef, framed: Buffer, stream: string): void {
    this.memory.set(ref, { framed, stream });
    this.queue.push(ref);
    this.unassignedBytes += framed.length;
    this.segments.addBytes(stream, framed.length);
    this.segments.pending++;
    if (this.writeError === undefined) this.schedule();
  }

  /** The framed bytes of a record not wholly on disk yet. */
  framedOf(ref: SpoolRef): Buffer | undefined {
    return this.memory.get(ref)?.framed;
  }

  /** Acknowledges a record not given its place yet: delivered before the disk took it, it is never written. */
  ackUnwritten(ref: SpoolRef): void {
    const held = this.memory.get(ref);
    if (!held) return;
    this.memory.delete(ref);
    this.unassignedBytes -= held.framed.length;
    this.segments.addBytes(held.stream, -held.framed.length);
    this.segments.pending--;
    if (++this.ackedInQueue > 1024 && this.ackedInQueue * 2 > this.queue.length - this.queueHead) {
      this.queue = this.queue.slice(this.queueHead).filter((r) => this.memory.has(r));
      this.queueHead = 0;
      this.ackedInQueue = 0;
    }
  }

  /** A segment was deleted: its cut-short record is gone with it, and what waits may fit now. */
  segmentRemoved(seg: Segment): void {
    if (seg.tail) this.memory.delete(seg.tail);
    if (this.writeError !== undefined) this.schedule();
  }

  /** Writes alert records: first the rest of records cut short, then new ones, each at its place. */
  private flushLog(): NodeJS.ErrnoException | undefined {
    const { segments, memory } = this;
    for (const seg of segments.all.values()) {
      if (seg.log.queued === 0) continue;
      const { error } = seg.log.drain();
      if (error) return error;
      if (seg.tail) memory.delete(seg.tail);
      seg.tail = undefined;
      if (segments.currents.get(seg.stream) !== seg) seg.log.close();
    }
    // Order matters only within a stream: group what waits by stream, oldest first.
    const byStream = new Map<string, SpoolRef[]>();
    for (let i = this.queueHead; i < this.queue.length; i++) {
      const ref = this.queue[i] as SpoolRef;
      const held = memory.get(ref);
      if (!held) continue; // acknowledged before it was written: never written
      let list = byStream.get(held.stream);
      if (!list) {
        list = [];
        byStream.set(held.stream, list);
      }
      list.push(ref);
    }
    const queue: SpoolRef[] = [];
    this.queue = queue;
    this.queueHead = 0;
    this.ackedInQueue = 0;
    let failure: NodeJS.ErrnoException | undefined;
    for (const [stream, refs] of byStream) {
      if (failure) {
        queue.push(...refs);
        continue;
      }
      let next = 0;
      while (next < refs.length) {
        const seg = segments.currentFor(stream, this.options.segmentBytes);
        const batchStart = seg.logBytes;
        const batch: SpoolRef[] = [];
        let room = this.options.segmentBytes - seg.logBytes;
        while (next < refs.length) {
          const ref = refs[next] as SpoolRef;
          const framed = (memory.get(ref) as Held).framed;
          if (batch.length > 0 && framed.length > room) break;
          next++;
          ref.segment = seg.n;
          ref.index = seg.records++;
          ref.offset = seg.logBytes + HEADER_BYTES;
          seg.logBytes += framed.length;
          room -= framed.length;
          this.unassignedBytes -= framed.length;
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
          this.unassignedBytes += HEADER_BYTES + ref.length;
          ref.segment = UNASSIGNED;
          ref.index = -1;
          ref.offset = -1;
        }
        queue.push(...back, ...refs.slice(next));
        break;
      }
    }
    return failure;
  }

  private flushAcks(): NodeJS.ErrnoException | undefined {
    let first: NodeJS.ErrnoException | undefined;
    for (const seg of this.segments.all.values()) {
      if (seg.ack.queued === 0) continue;
      const { error } = seg.ack.drain();
      first ??= error;
    }
    return first;
  }

  /** One attempt to write everything waiting; true when it all reached the disk. */
  flush(): boolean {
    const { dir, logger } = this.options;
    this.flushScheduled = false;
    let error: unknown;
    try {
      // Alert records first, then acknowledgements.
      error = this.flushLog();
      error = this.flushAcks() ?? error;
      if (!error && this.options.fsyncIntervalMs === 0) this.segments.syncAll(false);
    } catch (thrown) {
      error = thrown;
    }
    if (!error) {
      if (this.writeError !== undefined) logger.info("alert spool writable again", { dir });
      this.writeError = undefined;
      clearTimeout(this.retryTimer);
      this.retryTimer = undefined;
      return true;
    }
    const reason = writeErrorReason(error);
    this.options.onWriteError?.(reason);
    this.lastFailureMs = Date.now();
    if (this.writeError === undefined) {
      logger.error("cannot write the alert spool; alerts wait in memory until it can", {
        error: new HiveError("DeliveryFailed", "spool write failed", {
          object: dir,
          hint: "free space on the spool's disk (or fix its I/O errors); writing is retried",
          reason,
          cause: error,
        }),
        unwrittenBytes: this.unassignedBytes,
      });
    }
    this.writeError = (error as Error).message ?? String(error);
    if (!this.retryTimer && !this.closed) {
      this.retryTimer = setTimeout(() => {
        this.retryTimer = undefined;
        if (!this.closed) this.flush();
      }, this.options.retryWriteMs);
      this.retryTimer.unref();
    }
    return false;
  }

  /** Writes at the end of this event-loop turn. */
  schedule(): void {
    if (this.flushScheduled || this.closed) return;
    this.flushScheduled = true;
    setImmediate(() => {
      if (this.flushScheduled && !this.closed) this.flush();
    });
  }

  /** Stops writing and syncing. */
  close(): void {
    this.closed = true;
    clearInterval(this.fsyncTimer);
    clearTimeout(this.retryTimer);
  }
}
