import { describe, expect, it } from "vitest";
import { isHiveError } from "../../api/errors.ts";
import { checkBudget, entryPath, splitPath, type Walk } from "./root-walk.ts";

const frame = (name: string) => ({ name, dev: 1n, ino: 1n });

function budgeted(walked: number, pending: number, maxComponents: number) {
  return {
    walked,
    pending: Array.from({ length: pending }, () => "x"),
    limits: { maxComponents, maxSymlinks: 40, create: false, mode: 0o444 },
    path: "/etc/shadow",
    symlinks: ["/a -> /b"],
  } satisfies Pick<Walk, "walked" | "pending" | "limits" | "path" | "symlinks">;
}

describe("root walk steps", () => {
  it("splits a path into the names to look up, dropping empty and . components but keeping ..", () => {
    expect(splitPath("//etc/./ssh/../shadow/")).toEqual(["etc", "ssh", "..", "shadow"]);
    expect(splitPath("/")).toEqual([]);
  });

  it("names an entry by the directories walked to it", () => {
    expect(entryPath({ stack: [frame("")] }, "etc")).toBe("/etc");
    expect(entryPath({ stack: [frame(""), frame("etc"), frame("ssh")] }, "key")).toBe("/etc/ssh/key");
  });

  it("refuses a walk as soon as the lookups made and pending exceed the bound, naming the bound", () => {
    expect(() => checkBudget(budgeted(3, 2, 5))).not.toThrow();
    let thrown: unknown;
    try {
      checkBudget(budgeted(3, 3, 5));
    } catch (error) {
      thrown = error;
    }
    expect(isHiveError(thrown, "PathInvalid")).toBe(true);
    expect(thrown).toMatchObject({
      object: "/etc/shadow",
      message: expect.stringContaining("more than 5 path components"),
      details: { bound: 5, symlinks: ["/a -> /b"] },
    });
  });
});
