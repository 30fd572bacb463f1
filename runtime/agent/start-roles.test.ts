import { describe, expect, it } from "vitest";
import { reportsOption } from "./start-roles.ts";

describe("the pods role's reports option", () => {
  it("is absent with --reports none, else the format with its fail window in ms", () => {
    expect(reportsOption({ reports: "none", reportFailWindowHours: 168 })).toEqual({});
    expect(reportsOption({ reports: "policyreport", reportFailWindowHours: 2 })).toEqual({
      reports: { format: "policyreport", failWindowMs: 7_200_000 },
    });
  });
});
