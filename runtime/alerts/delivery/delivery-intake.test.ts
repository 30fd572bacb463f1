import { describe, expect, it } from "vitest";
import { alertBytes, refusalMessage } from "./delivery-intake.ts";

describe("alert intake", () => {
  it("counts an alert's UTF-8 body plus a record's overhead", () => {
    expect(alertBytes({ body: "" })).toBe(128);
    expect(alertBytes({ body: "é" })).toBe(130);
  });

  it("says why the spool refused an alert", () => {
    expect(refusalMessage("too_large")).toContain("larger than the spool");
    expect(refusalMessage("spool_unwritable")).toContain("cannot write");
  });
});
