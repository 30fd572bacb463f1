import { describe, expect, it } from "vitest";
import { sinceLastScrape } from "./scrape-sources.ts";

describe("a cumulative figure read at scrape time", () => {
  it("adds what it grew by since the last scrape", () => {
    expect(sinceLastScrape(10n, 4n)).toBe(6n);
    expect(sinceLastScrape(7, 7)).toBe(0);
  });

  it("counts a smaller figure from zero again: its source restarted", () => {
    expect(sinceLastScrape(3n, 10n)).toBe(3n);
    expect(sinceLastScrape(0, 5)).toBe(0);
  });
});
