import { describe, expect, it } from "vitest";
import { UNSAFE_TEXT } from "../test/fixtures/hostile-text.ts";
import { DISPLAY_MAX, displaySafe, displaySafeDeep } from "./text.ts";

describe("displaySafe", () => {
  it("escapes newlines, ANSI escapes, NUL, C1 controls and bidi overrides into one printable line", () => {
    expect(displaySafe("cat\n\x1b[31mroot\u0000\u009b\u202eexe.txt\u2066")).toBe(
      "cat\\n\\x1b[31mroot\\x00\\x9b\\u202eexe.txt\\u2066",
    );
    expect(displaySafe("a\r\tb\u2028c")).toBe("a\\r\\tb\\u2028c");
    expect(displaySafe("\ud800 lone, paired 😀 kept")).toBe("\\ud800 lone, paired 😀 kept");
  });

  it("keeps ordinary text, backslashes included, as it is", () => {
    expect(displaySafe("/usr/bin/cat -> ../lib/x ünïcode 日本")).toBe(
      "/usr/bin/cat -> ../lib/x ünïcode 日本",
    );
    expect(displaySafe("C:\\n")).toBe("C:\\n");
  });

  it("bounds the length, cutting between characters and escapes and marking the cut", () => {
    const long = displaySafe("x".repeat(5000));
    expect(long).toHaveLength(DISPLAY_MAX);
    expect(long.endsWith("x…")).toBe(true);
    for (let max = 2; max < 30; max++) {
      const cut = displaySafe("ab\x1bcd😀😀\n".repeat(5), max);
      expect(cut.length).toBeLessThanOrEqual(max);
      expect(cut).toMatch(
        /^(ab\\x1bcd😀😀\\n)*(a|ab|ab\\x1b|ab\\x1bc|ab\\x1bcd|ab\\x1bcd😀|ab\\x1bcd😀😀)?…$/u,
      );
    }
  });

  it("changes nothing when applied again, so every exit may apply it", () => {
    for (const text of ["a\nb\x1b", "x".repeat(3000), `${"\u202e".repeat(900)}y`]) {
      const once = displaySafe(text, 500);
      expect(displaySafe(once, 500)).toBe(once);
      expect(displaySafe(once)).toBe(once);
    }
  });

  it("applies to every string of a structured value, bounding arrays and depth", () => {
    const out = displaySafeDeep({
      path: "/a\nb",
      symlinks: Array.from({ length: 40 }, (_, i) => `/l${i} -> \x1b`),
      at: new Date(0),
      n: 3,
      deep: { a: { b: { c: { d: { e: { f: { g: 1 } } } } } } },
    }) as Record<string, unknown>;
    expect(out.path).toBe("/a\\nb");
    expect(out.symlinks).toHaveLength(33);
    expect((out.symlinks as string[])[0]).toBe("/l0 -> \\x1b");
    expect((out.symlinks as string[])[32]).toBe("… 8 more");
    expect(out.at).toBe("1970-01-01T00:00:00.000Z");
    expect(out.n).toBe(3);
    expect(JSON.stringify(out)).not.toMatch(UNSAFE_TEXT);
    expect(JSON.stringify(out.deep)).toContain("[…]");
  });
});
