import { describe, expect, it } from "vitest";
import { spoolSettings } from "./spool-settings.ts";

describe("spool settings", () => {
  it("derives the defaults from the size bound", () => {
    expect(spoolSettings({})).toEqual({
      maxBytes: 64 * 1024 * 1024,
      quotaBytes: 64 * 1024 * 1024,
      segmentBytes: 4 * 1024 * 1024,
      fsyncIntervalMs: 1000,
      maxUnwrittenBytes: 8 * 1024 * 1024,
      retryWriteMs: 1000,
    });
  });

  it("keeps segments at 4 KiB at least and unwritten memory at a quarter of the spool at most", () => {
    const s = spoolSettings({ maxBytes: 16 * 1024, segmentBytes: 100, maxUnwrittenBytes: 1 << 20 });
    expect(s.segmentBytes).toBe(4096);
    expect(s.maxUnwrittenBytes).toBe(4096);
    expect(spoolSettings({ fsyncIntervalMs: 0, destinationQuotaBytes: 5 })).toMatchObject({
      fsyncIntervalMs: 0,
      quotaBytes: 5,
    });
  });
});
