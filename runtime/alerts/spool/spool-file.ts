/**
 * The spool's file handling: append-only files whose writes are accounted to the byte (a
 * write cut short by a full disk is continued, never repeated, so a file is always a prefix
 * of what was meant to be written), fdatasync on libuv's thread pool, and fsync of the
 * directory after a file was created or removed (so a machine crash cannot lose a segment's
 * name while its data was synced).
 */
import {
  closeSync,
  fdatasync,
  fdatasyncSync,
  fsync,
  fsyncSync,
  openSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import type { Logger } from "../../log.ts";

/** Why a spool write failed (the `reason` label of hive_spool_write_errors_total). */
export const SPOOL_WRITE_ERRORS = ["enospc", "edquot", "eio", "erofs", "emfile", "other"] as const;
export type SpoolWriteError = (typeof SPOOL_WRITE_ERRORS)[number];

export function writeErrorReason(error: unknown): SpoolWriteError {
  const code = String((error as NodeJS.ErrnoException | undefined)?.code ?? "").toLowerCase();
  if (code === "enfile") return "emfile";
  return (SPOOL_WRITE_ERRORS as readonly string[]).includes(code) ? (code as SpoolWriteError) : "other";
}

/**
 * File descriptors of one spool directory. An fd is not closed while a background sync of
 * it is pending, so its number cannot be reused under the sync.
 */
export class SpoolFiles {
  private readonly syncing = new Set<number>();
  private readonly closeAfterSync = new Set<number>();
  private dirFd: number | undefined;
  /** A file was created or removed since the directory was last synced. */
  dirDirty = false;

  private readonly dir: string;
  private readonly logger: Logger;

  constructor(dir: string, logger: Logger) {
    this.dir = dir;
    this.logger = logger;
  }

  close(fd: number): void {
    if (this.syncing.has(fd)) this.closeAfterSync.add(fd);
    else closeSync(fd);
  }

  /** fdatasync on the thread pool (a slow disk never stalls the event loop). */
  syncInBackground(fd: number): void {
    if (this.syncing.has(fd)) return;
    this.syncing.add(fd);
    fdatasync(fd, (error) => {
      this.syncing.delete(fd);
      if (this.closeAfterSync.delete(fd)) closeSync(fd);
      if (error) this.logger.warn("alert spool fdatasync failed", { error });
    });
  }

  syncNow(fd: number): void {
    fdatasyncSync(fd);
  }

  private directory(): number {
    this.dirFd ??= openSync(this.dir, "r");
    return this.dirFd;
  }

  /** Makes file creations and removals durable: synchronously, or on the thread pool. */
  syncDirectory(background: boolean): void {
    if (!this.dirDirty) return;
    this.dirDirty = false;
    try {
      const fd = this.directory();
      if (!background) {
        fsyncSync(fd);
        return;
      }
      if (this.syncing.has(fd)) {
        this.dirDirty = true;
        return;
      }
      this.syncing.add(fd);
      fsync(fd, (error) => {
        this.syncing.delete(fd);
        if (this.closeAfterSync.delete(fd)) closeSync(fd);
        if (error) this.logger.warn("alert spool directory fsync failed", { error });
      });
    } catch (error) {
      this.dirDirty = true;
      this.logger.warn("alert spool directory fsync failed", { error });
    }
  }

  /** Removes a file; true when it is gone (or never existed). */
  remove(path: string): boolean {
    try {
      unlinkSync(path);
      this.dirDirty = true;
      return true;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return true;
      this.logger.error("cannot delete a spool file", { file: path, error });
      return false;
    }
  }

  closeDirectory(): void {
    if (this.dirFd !== undefined) this.close(this.dirFd);
    this.dirFd = undefined;
  }
}

/**
 * One append-only file: bytes queued, then written in order. After a failed or short
 * write the written part is dropped from the queue and the rest is written by the next
 * `drain` right after it: nothing is written twice.
 */
export class AppendFile {
  fd: number | undefined;
  private queue: Buffer[] = [];
  /** Bytes queued and not yet written. */
  queued = 0;
  /** Written since the last sync. */
  dirty = false;

  readonly path: string;
  private readonly files: SpoolFiles;

  constructor(path: string, files: SpoolFiles) {
    this.path = path;
    this.files = files;
  }

  push(buf: Buffer): void {
    this.queue.push(buf);
    this.queued += buf.length;
  }

  /** Writes the queue; returns how many bytes went to the file and the error that stopped it, if any. */
  drain(): { written: number; error?: NodeJS.ErrnoException } {
    if (this.queued === 0) return { written: 0 };
    const buf = this.queue.length === 1 ? (this.queue[0] as Buffer) : Buffer.concat(this.queue);
    let written = 0;
    try {
      if (this.fd === undefined) {
        this.fd = openSync(this.path, "a", 0o600);
        this.files.dirDirty = true;
      }
      while (written < buf.length) written += writeSync(this.fd, buf, written, buf.length - written);
    } catch (error) {
      this.queue = written < buf.length ? [buf.subarray(written)] : [];
      this.queued = buf.length - written;
      if (written > 0) this.dirty = true;
      return { written, error: error as NodeJS.ErrnoException };
    }
    this.queue = [];
    this.queued = 0;
    this.dirty = true;
    return { written };
  }

  /** Drops what is queued beyond the first `keep` bytes (records given back before they were written). */
  truncateQueue(keep: number): void {
    if (keep >= this.queued) return;
    const buf = Buffer.concat(this.queue).subarray(0, keep);
    this.queue = keep > 0 ? [buf] : [];
    this.queued = keep;
  }

  sync(background: boolean): void {
    if (!this.dirty || this.fd === undefined) return;
    this.dirty = false;
    if (background) this.files.syncInBackground(this.fd);
    else this.files.syncNow(this.fd);
  }

  close(): void {
    if (this.fd !== undefined) this.files.close(this.fd);
    this.fd = undefined;
  }
}
