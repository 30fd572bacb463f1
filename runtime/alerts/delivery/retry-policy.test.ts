import { describe, expect, it } from "vitest";
import { DEFAULT_RETRY, retryDelay, retrySettings } from "./retry-policy.ts";

describe("delivery retry policy", () => {
  it("caps the wait between attempts at 15 s by default, so a recovered receiver gets its backlog within about that", () => {
    const settings = retrySettings({});
    expect(settings.maxMs).toBe(15_000);
    for (const attempts of [1, 5, 10, 30, 1_000]) {
      const { delayMs, wholeDestination } = retryDelay(attempts, undefined, settings, () => 1);
      expect(delayMs).toBeLessThanOrEqual(15_000);
      expect(wholeDestination).toBe(false);
    }
    expect(retryDelay(1_000, undefined, settings, () => 1).delayMs).toBe(15_000);
    expect(retryDelay(1, undefined, settings, () => 0).delayMs).toBe(DEFAULT_RETRY.baseMs / 2);
  });

  it("applies a configured cap, and honours Retry-After for the whole destination up to its own cap", () => {
    const settings = retrySettings({ backoffMaxMs: 300, maxRetryAfterMs: 2_000 });
    expect(retryDelay(50, undefined, settings, () => 1).delayMs).toBe(300);
    expect(retryDelay(1, 1_000, settings, () => 1)).toEqual({ delayMs: 1_000, wholeDestination: true });
    expect(retryDelay(1, 60_000, settings, () => 1).delayMs).toBe(2_000);
  });
});
