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

export function recoverSpool(
  dir: string,
  logger: Logger,
  streamOf: (url: string) => string,
  onCorrupt?: (file: string) => void,
): Recovery {
  const path = (n: number, ext: "log" | "ack") => join(dir, segmentFileName(n, ext));
  const segments: RecoveredSegment[] = [];
  const recovered: RecoveredRecord[] = [];
  let nextSegment = 1;
  const found = readdirSync(dir)
    .map((f) => SEGMENT_FILE.exec(f))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => Number(m[1]))
    .sort((a, b) => a - b);
  for (const n of found) {
    nextSegment = Math.max(nextSegment, n + 1);
    const logName = segmentFileName(n, "log");
    let logData: Buffer;
    try {
      logData = readFileSync(path(n, "log"));
    } catch (error) {
      logger.error("cannot read a spool file; skipping it", { file: logName, error });
      continue;
    }
    const scan = scanFrames(logData, TYPE_ALERT);
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
    if (!scan.ok && scan.torn) {
      logger.warn("torn record at the end of a spool file ignored (the agent stopped mid-write)", {
        file: logName,
        offset: scan.offset,
        reason: scan.reason,
      });
    }
    if (corrupt) {
      const error = new HiveError(
        "SpoolCorrupt",
        "alert spool file is corrupt; its readable records are kept, the rest is skipped",
        {
          object: logName,
          hint: "the disk or another process damaged the spool; alerts in the damaged part cannot be delivered",
          offset: scan.ok ? undefined : scan.offset,
          reason: scan.ok ? "undecodable record" : scan.reason,
          kept: records.length,
        },
      );
      logger.error(error.message, { error });
      onCorrupt?.(logName);
    }
    const seg: RecoveredSegment = {
      n,
      stream: records[0] ? streamOf(records[0].url) : "",
      logBytes: logData.length,
      ackBytes: 0,
      records: records.length,
      acked: new Set(),
    };
    try {
      const ackData = readFileSync(path(n, "ack"));
      seg.ackBytes = ackData.length;
      const acks = scanFrames(ackData, TYPE_ACK);
      if (!acks.ok && !acks.torn) {
        logger.error("alert spool acknowledgement file is corrupt; its alerts may be delivered twice", {
          error: new HiveError("SpoolCorrupt", "corrupt acknowledgement file", {
            object: segmentFileName(n, "ack"),
            reason: acks.reason,
          }),
        });
        onCorrupt?.(segmentFileName(n, "ack"));
      }
      for (const p of acks.payloads) {
        const index = p.length === 4 ? p.readUInt32LE(0) : -1;
        if (index >= 0 && index < seg.records) seg.acked.add(index);
      }
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT")
        logger.error("cannot read a spool acknowledgement file", { file: segmentFileName(n, "ack"), error });
    }
    segments.push(seg);
    records.forEach((record, index) => {
      if (seg.acked.has(index)) return;
      const payload = scan.payloads[index] as Buffer;
      recovered.push({
        id: record.id,
        url: record.url,
        trapId: record.trapId,
        createdMs: record.createdMs,
        ref: { segment: n, index, offset: scan.offsets[index] as number, length: payload.length },
        bytes: HEADER_BYTES + payload.length,
      });
    });
  }
  return { segments, recovered, nextSegment };
}
