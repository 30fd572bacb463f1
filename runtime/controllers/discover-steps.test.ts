import { describe, expect, it } from "vitest";
import { HiveError } from "../../api/errors.ts";
import { FailureBackoff, failureVerdict } from "./discover-outcomes.ts";

describe("a failed resolution's verdict", () => {
  it("keeps a deleted file's HiveData, marked missing, only when there is one", () => {
    const gone = new HiveError("FileNotFound", "no such file");
    expect(failureVerdict(gone, true)).toBe("missing");
    expect(failureVerdict(gone, false)).toBe("drop");
  });

  it("retries what goes away on its own", () => {
    expect(failureVerdict(new HiveError("ContainerNotReady", "starting"), false)).toBe("retry");
    expect(failureVerdict(new HiveError("PathInvalid", "slow", { timedOut: true }), true)).toBe("retry");
    expect(failureVerdict(new HiveError("PathInvalid", "bad path"), true)).toBe("drop");
  });
});

describe("a failure backoff", () => {
  it("doubles per failure without jitter, up to its cap, and starts over after a success", () => {
    const b = new FailureBackoff({ baseMs: 100, maxMs: 300 });
    expect([b.failed("a"), b.failed("a"), b.failed("a")]).toEqual([100, 200, 300]);
    b.succeeded("a");
    expect(b.failed("a")).toBe(100);
    b.retain(new Set());
    expect(b.failed("a")).toBe(100);
  });
});
