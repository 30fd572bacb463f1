import { describe, expect, it } from "vitest";
import { credentialsCheck } from "./agent-serve.ts";

describe("the callback-credentials readiness check", () => {
  it("passes once the callback's Secrets are read, and says why it waits before", () => {
    expect(credentialsCheck({ pending: undefined })).toEqual({ ok: true });
    expect(credentialsCheck({ pending: "forbidden" })).toEqual({
      ok: false,
      message: "the callback's Secrets are not read yet: forbidden",
    });
  });
});
