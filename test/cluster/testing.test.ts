/** The test helpers' polling: what it retries and what it does not. */
import { describe, expect, it } from "vitest";
import { waitFor } from "./testing.ts";

/** What client-node throws for a 429 (the shape the real API server's answer takes). */
function tooManyRequests(): Error & { code: number } {
  return Object.assign(new Error("HTTP-Code: 429\nMessage: storage is (re)initializing"), { code: 429 });
}

describe("waitFor", () => {
  it("polls again when the API server answers 429, as client-go retries it", async () => {
    let calls = 0;
    const value = await waitFor(
      () => {
        calls++;
        if (calls < 3) throw tooManyRequests();
        return "listed";
      },
      { timeoutMs: 2000 },
    );
    expect({ value, calls }).toEqual({ value: "listed", calls: 3 });
  });

  it("fails at once on any other error, and with the 429 itself once the time is up", async () => {
    let calls = 0;
    const forbidden = Object.assign(new Error("forbidden"), { code: 403 });
    await expect(
      waitFor(() => {
        calls++;
        throw forbidden;
      }),
    ).rejects.toBe(forbidden);
    expect(calls).toBe(1);
    await expect(
      waitFor(
        () => {
          throw tooManyRequests();
        },
        { timeoutMs: 50 },
      ),
    ).rejects.toThrow(/429/);
  });
});
