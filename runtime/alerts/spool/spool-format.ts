/**
 * The spool's on-disk format: segment file names and the record framing shared by the
 * writer (spool-writer.ts, spool-segments.ts) and the reader at start-up (spool-recovery.ts).
 *
 * Framing (every record in both files), little-endian:
 *   magic "HV" (2 bytes) · version 1 (1) · type (1: alert, 2: ack) · payload length (4) · CRC-32 of payload (4) · payload
 * An alert payload is one JSON line {i: id, u: url, t: trapId, c: createdMs} followed by the
 * alert body; an ack payload is the acknowledged record's index in its segment (uint32).
 */
import { crc32 } from "node:zlib";

export interface SpoolRecord {
  id: string;
  url: string;
  trapId: string;
  /** Wall-clock ms when the alert was produced (delivery latency survives restarts). */
  createdMs: number;
  /** The alert, serialised. */
  body: string;
}

const MAGIC0 = 0x48; // "H"
const MAGIC1 = 0x56; // "V"
const VERSION = 1;
export const TYPE_ALERT = 1;
export const TYPE_ACK = 2;
export const HEADER_BYTES = 12;

export const SEGMENT_FILE = /^seg-(\d{1,16})\.log$/;
export const segmentFileName = (n: number, ext: "log" | "ack") => `seg-${String(n).padStart(16, "0")}.${ext}`;

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

/** The acknowledgement of record `index` of a segment, framed. */
export function frameAck(index: number): Buffer {
  const payload = Buffer.allocUnsafe(4);
  payload.writeUInt32LE(index, 0);
  return frame(TYPE_ACK, payload);
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
export function frameRecord(record: SpoolRecord): Buffer {
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

/** The record in an alert payload; undefined when it does not decode. */
export function decodeRecord(payload: Buffer): SpoolRecord | undefined {
  try {
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
  } catch {
    return undefined;
  }
}

/** The body of one framed alert record (header included); undefined when damaged. */
export function decodeFramedBody(framed: Buffer): string | undefined {
  const scan = scanFrames(framed, TYPE_ALERT);
  return scan.payloads.length === 1 ? decodeRecord(scan.payloads[0] as Buffer)?.body : undefined;
}
