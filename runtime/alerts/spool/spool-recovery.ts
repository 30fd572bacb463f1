/**
 * Reading a spool directory at start-up: which segments exist, which of their records are
 * not acknowledged yet. Bodies stay on disk (memory stays small after a long outage).
 *
 * An incomplete or checksum-failing record at the very end of a file is a torn write (the
 * process or machine died mid-append): ignored with a warning. A bad record anywhere else
 * means the file is corrupt: the records before it are kept, the rest is skipped, and an
 * error is logged and reported through `onCorrupt`.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { HiveError } from "../../../api/errors.ts";
import type { Logger } from "../../log.ts";
import {
  decodeRecord,
  type FrameScan,
  HEADER_BYTES,
  SEGMENT_FILE,
  type SpoolRecord,
  scanFrames,
  segmentFileName,
  TYPE_ACK,
  TYPE_ALERT,
} from "./spool-format.ts";

export interface SpoolRef {
  segment: number;
  index: number;
  /** Byte offset and length of the record's payload in its segment file (for read-back). */
  offset: number;
  length: number;
}

/** A recovered record: its body stays on disk until `read`. */
export interface RecoveredRecord extends Omit<SpoolRecord, "body"> {
  ref: SpoolRef;
  bytes: number;
}

export interface RecoveredSegment {
  n: number;
  /** The destination its records go to (spool.ts streamOf of the first record's URL); "" when empty. */
  stream: string;
  logBytes: number;
  ackBytes: number;
  records: number;
  acked: Set<number>;
}

export interface Recovery {
  /** Segments found, oldest first (fully acknowledged ones included: the caller deletes them). */
  segments: RecoveredSegment[];
  /** Undelivered records, oldest first. */
  recovered: RecoveredRecord[];
  /** The number the next new segment gets. */
  nextSegment: number;
}

/** Reads the spool directory: its segments and their undelivered records, oldest first. */
export function recoverSpool(
  dir: string,
  logger: Logger,
  streamOf: (url: string) => string,
  onCorrupt?: (file: string) => void,
): Recovery {
  const segments: RecoveredSegment[] = [];
  const recovered: RecoveredRecord[] = [];
  let nextSegment = 1;
  for (const n of segmentNumbers(readdirSync(dir))) {
    nextSegment = Math.max(nextSegment, n + 1);
    const log = readSegmentLog(dir, n, logger, onCorrupt);
    if (!log) continue;
    const seg: RecoveredSegment = {
      n,
      stream: log.records[0] ? streamOf(log.records[0].url) : "",
      logBytes: log.bytes,
      ackBytes: 0,
      records: log.records.length,
      acked: new Set(),
    };
    readSegmentAcks(dir, seg, logger, onCorrupt);
    segments.push(seg);
    for (const record of undeliveredOf(seg, log)) recovered.push(record);
  }
  return { segments, recovered, nextSegment };
}

/** The segment numbers among a directory's file names, ascending (oldest first). */
export function segmentNumbers(fileNames: readonly string[]): number[] {
  return fileNames
    .map((f) => SEGMENT_FILE.exec(f))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => Number(m[1]))
    .sort((a, b) => a - b);
}

/** A segment's log, decoded up to its first bad record. */
export interface DecodedLog {
  bytes: number;
  scan: FrameScan;
  /** The records before the first bad one (all of them when none is bad). */
  records: SpoolRecord[];
  /** A bad record before the end, or one that frames but does not decode: not a torn write. */
  corrupt: boolean;
}

export function decodeLog(data: Buffer): DecodedLog {
  const scan = scanFrames(data, TYPE_ALERT);
  const records: SpoolRecord[] = [];
  let corrupt = !scan.ok && !scan.torn;
  for (const payload of scan.payloads) {
    const record = decodeRecord(payload);
    if (!record) {
      corrupt = true;
      break;
    }
    records.push(record);
  }
  return { bytes: data.length, scan, records, corrupt };
}

/** The record indexes an acknowledgement file holds, among the segment's `records`. */
export function ackedIndexes(payloads: readonly Buffer[], records: number): Set<number> {
  const acked = new Set<number>();
  for (const p of payloads) {
    const index = p.length === 4 ? p.readUInt32LE(0) : -1;
    if (index >= 0 && index < records) acked.add(index);
  }
  return acked;
}

/** The segment's records not acknowledged yet, in order, their bodies left on disk. */
export function undeliveredOf(seg: RecoveredSegment, log: DecodedLog): RecoveredRecord[] {
  const out: RecoveredRecord[] = [];
  log.records.forEach((record, index) => {
    if (seg.acked.has(index)) return;
    const payload = log.scan.payloads[index] as Buffer;
    out.push({
      id: record.id,
      url: record.url,
      trapId: record.trapId,
      createdMs: record.createdMs,
      ref: { segment: seg.n, index, offset: log.scan.offsets[index] as number, length: payload.length },
      bytes: HEADER_BYTES + payload.length,
    });
  });
  return out;
}

/** Reads and decodes a segment's log, saying what was torn or corrupt; undefined when unreadable. */
function readSegmentLog(
  dir: string,
  n: number,
  logger: Logger,
  onCorrupt: ((file: string) => void) | undefined,
): DecodedLog | undefined {
  const logName = segmentFileName(n, "log");
  let data: Buffer;
  try {
    data = readFileSync(join(dir, logName));
  } catch (error) {
    logger.error("cannot read a spool file; skipping it", { file: logName, error });
    return undefined;
  }
  const log = decodeLog(data);
  const { scan } = log;
  if (!scan.ok && scan.torn) {
    logger.warn("torn record at the end of a spool file ignored (the agent stopped mid-write)", {
      file: logName,
      offset: scan.offset,
      reason: scan.reason,
    });
  }
  if (log.corrupt) {
    const error = new HiveError(
      "SpoolCorrupt",
      "alert spool file is corrupt; its readable records are kept, the rest is skipped",
      {
        object: logName,
        hint: "the disk or another process damaged the spool; alerts in the damaged part cannot be delivered",
        offset: scan.ok ? undefined : scan.offset,
        reason: scan.ok ? "undecodable record" : scan.reason,
        kept: log.records.length,
      },
    );
    logger.error(error.message, { error });
    onCorrupt?.(logName);
  }
  return log;
}

/** Fills in `seg.acked` and `seg.ackBytes` from its acknowledgement file, when there is one. */
function readSegmentAcks(
  dir: string,
  seg: RecoveredSegment,
  logger: Logger,
  onCorrupt: ((file: string) => void) | undefined,
): void {
  const ackName = segmentFileName(seg.n, "ack");
  try {
    const ackData = readFileSync(join(dir, ackName));
    seg.ackBytes = ackData.length;
    const acks = scanFrames(ackData, TYPE_ACK);
    if (!acks.ok && !acks.torn) {
      logger.error("alert spool acknowledgement file is corrupt; its alerts may be delivered twice", {
        error: new HiveError("SpoolCorrupt", "corrupt acknowledgement file", {
          object: ackName,
          reason: acks.reason,
        }),
      });
      onCorrupt?.(ackName);
    }
    seg.acked = ackedIndexes(acks.payloads, seg.records);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT")
      logger.error("cannot read a spool acknowledgement file", { file: ackName, error });
  }
}
