import { describe, expect, it } from "vitest";
import { isHiveError } from "../../api/errors.ts";
import { provenKey } from "./trap-proof.ts";

const stated = { major: 0, minor: 27, ino: 17n };
const overlay = { major: 0, minor: 26, ino: 17n };

describe("the identity a trap is armed on", () => {
  it("is stat()'s when the kernel checked that one", () => {
    expect(provenKey(stated, { ids: [overlay, { ...stated }] }, "/f")).toBe(stated);
  });

  it("is the first identity the kernel checked when stat() named another (an overlay's layer)", () => {
    expect(provenKey(stated, { ids: [overlay, { major: 0, minor: 30, ino: 5n }] }, "/f")).toBe(overlay);
  });

  it("does not exist when the kernel saw no check: TrapNotProven, naming stat()'s identity", () => {
    let error: unknown;
    try {
      provenKey(stated, { ids: [] }, "/etc/f");
    } catch (e) {
      error = e;
    }
    expect(isHiveError(error, "TrapNotProven")).toBe(true);
    expect((error as { details: Record<string, unknown> }).details.statIdentity).toBe("0:27:17");
  });
});
