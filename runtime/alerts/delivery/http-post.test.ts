import { describe, expect, it } from "vitest";
import { backoffDelay } from "../../backoff.ts";
import { classifyStatus, parseRetryAfter } from "./http-post.ts";

describe("delivery failure classification", () => {
  it("retries 5xx, 429, 408, 425, refused credentials (401, 403) and 404, and gives up on other 4xx", () => {
    expect(classifyStatus(204)).toEqual({ ok: true, retryable: false });
    for (const s of [500, 502, 503, 429, 408, 425, 404]) expect(classifyStatus(s).retryable).toBe(true);
    for (const s of [401, 403])
      expect(classifyStatus(s)).toEqual({ ok: false, retryable: true, class: "http_auth" });
    for (const s of [400, 405, 410, 413, 422])
      expect(classifyStatus(s)).toEqual({ ok: false, retryable: false, class: "http_4xx" });
  });

  it("reads Retry-After as seconds or as an HTTP date", () => {
    const now = Date.parse("2026-11-22T00:00:00Z");
    expect(parseRetryAfter("3", now)).toBe(3000);
    expect(parseRetryAfter("Sun, 22 Nov 2026 00:00:10 GMT", now)).toBe(10_000);
    expect(parseRetryAfter("Sat, 21 Nov 2026 00:00:10 GMT", now)).toBe(0);
    expect(parseRetryAfter("soon", now)).toBeUndefined();
    expect(parseRetryAfter(undefined, now)).toBeUndefined();
  });

  it("backs off exponentially between half and all of the capped delay", () => {
    const opts = { baseMs: 100, maxMs: 1000 };
    expect(backoffDelay(1, opts, () => 0)).toBe(50);
    expect(backoffDelay(1, opts, () => 1)).toBe(100);
    expect(backoffDelay(3, opts, () => 0)).toBe(200);
    expect(backoffDelay(20, opts, () => 1)).toBe(1000);
  });
});
