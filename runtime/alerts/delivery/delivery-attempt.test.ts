import { describe, expect, it } from "vitest";
import { HiveError, isHiveError } from "../../../api/errors.ts";
import { alertJsonOf, isReadRetryable, rejection } from "./delivery-attempt.ts";
import type { Item } from "./delivery-queue.ts";

const item = (body: string, ref?: Item["ref"]): Item => ({
  rec: { id: "a-1", url: "http://127.0.0.1:9/hook", trapId: "t-1", createdMs: 0, body },
  ref,
  bytes: 10,
  attempts: 1,
  inFlight: false,
  done: false,
  origin: "http://127.0.0.1:9",
});
const ref = { segment: 1, index: 0, offset: 12, length: 5 };

describe("a delivery attempt's steps", () => {
  it("sends the body kept in memory, else the one read back from the spool", () => {
    expect(alertJsonOf(item('{"a":1}'), undefined)).toBe('{"a":1}');
    expect(alertJsonOf(item("", ref), { read: () => '{"b":2}' })).toBe('{"b":2}');
  });

  it("calls an alert gone from the spool corrupt", () => {
    expect(() => alertJsonOf(item("", ref), { read: () => undefined })).toThrow(HiveError);
    try {
      alertJsonOf(item(""), undefined);
    } catch (error) {
      expect(isHiveError(error, "SpoolCorrupt")).toBe(true);
    }
  });

  it("retries a read-back only when the disk failed and the alert is still wanted", () => {
    const diskError = new HiveError("DeliveryFailed", "EIO");
    const corrupt = new HiveError("SpoolCorrupt", "checksum");
    expect(isReadRetryable(diskError, { done: false }, false)).toBe(true);
    expect(isReadRetryable(corrupt, { done: false }, false)).toBe(false);
    expect(isReadRetryable(diskError, { done: true }, false)).toBe(false);
    expect(isReadRetryable(diskError, { done: false }, true)).toBe(false);
  });

  it("logs a refusal with the redacted URL, the receiver's answer and a fix", () => {
    const { error, answer } = rejection(
      { url: "http://127.0.0.1:9/hook?token=secret", format: "json" },
      {
        ok: false,
        retryable: false,
        class: "http_4xx",
        status: 410,
        message: "HTTP 410 Gone",
        answer: "gone\u0007",
      },
      { id: "a-1", trapId: "t-1" },
    );
    expect(error.message).toBe("alert callback rejected the alert: HTTP 410 Gone");
    expect(error.object).toBe("http://127.0.0.1:9/hook");
    expect(error.hint).toBeTruthy();
    expect(JSON.stringify(error)).not.toContain("secret");
    expect(answer).not.toContain("\u0007");
    expect(answer).toContain("gone");
  });
});
