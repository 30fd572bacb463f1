import { describe, expect, it } from "vitest";
import { ANSWER_EXCERPT_BYTES, AnswerExcerpt, errorResult, responseResult } from "./post-result.ts";

describe("a POST's result", () => {
  it("is delivered on 2xx, whatever the body", () => {
    expect(responseResult(202, "Accepted", "", undefined)).toEqual({ ok: true, status: 202 });
  });

  it("keeps a refusal's status line and answer, and reads Retry-After only on 429 and 503", () => {
    expect(responseResult(400, "Bad Request", "invalid_payload", "7")).toEqual({
      ok: false,
      retryable: false,
      class: "http_4xx",
      status: 400,
      message: "HTTP 400 Bad Request",
      answer: "invalid_payload",
    });
    expect(responseResult(429, undefined, "", "3")).toMatchObject({
      retryAfterMs: 3000,
      message: "HTTP 429",
    });
    expect(responseResult(503, "", "", ["2", "9"])).toMatchObject({ class: "http_5xx", retryAfterMs: 2000 });
    expect(responseResult(503, "", "", "later")).not.toHaveProperty("retryAfterMs");
    expect(responseResult(503, "", "", undefined)).not.toHaveProperty("answer");
  });

  it("classifies a failure without an answer by its error code", () => {
    const refused = Object.assign(new Error("connect refused"), { code: "ECONNREFUSED" });
    expect(errorResult(refused)).toEqual({
      ok: false,
      retryable: true,
      class: "refused",
      message: "ECONNREFUSED: connect refused",
    });
    expect(errorResult(new Error("odd"))).toEqual({
      ok: false,
      retryable: true,
      class: "other",
      message: "odd",
    });
  });
});

describe("the answer excerpt", () => {
  it("keeps at most the first ANSWER_EXCERPT_BYTES, trimmed, across chunks", () => {
    const excerpt = new AnswerExcerpt(true);
    excerpt.add(Buffer.from("  first "));
    excerpt.add(Buffer.alloc(ANSWER_EXCERPT_BYTES, "x"));
    excerpt.add(Buffer.from("never kept"));
    const text = excerpt.text();
    expect(text.startsWith("first x")).toBe(true);
    expect(Buffer.byteLength(text)).toBe(ANSWER_EXCERPT_BYTES - 2);
    expect(text).not.toContain("never");
  });

  it("keeps nothing of an answer it is not asked to keep", () => {
    const excerpt = new AnswerExcerpt(false);
    excerpt.add(Buffer.from("ok"));
    expect(excerpt.text()).toBe("");
  });
});
