import fc from "fast-check";
import { RE2JS } from "re2js";
import { describe, expect, it } from "vitest";
import { containerNameMatcher, MAX_PATTERN_PROGRAM, programBound } from "./container-name.ts";

function matches(pattern: string, name: string): boolean {
  const m = containerNameMatcher(pattern);
  if (!m.ok) throw new Error(m.message);
  return m.matches(name);
}

describe("container-name patterns", () => {
  it("match the whole name, every alternative included", () => {
    expect(matches("nginx|sidecar", "sidecar")).toBe(true);
    expect(matches("nginx|sidecar", "nginx-sidecar")).toBe(false);
    expect(matches("side", "sidecar")).toBe(false);
    expect(matches("(?i)NG.*", "nginx")).toBe(true);
    expect(matches("[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", "api-7")).toBe(true);
  });

  it("cannot escape the whole-name anchoring with unbalanced groups", () => {
    expect(containerNameMatcher("a)|(b").ok).toBe(false);
  });

  it.each([
    ["(a)\\1", "invalid escape sequence"],
    ["(?=a)a", "unsupported Perl syntax"],
    ["(?<=a)b", "invalid named capture"],
    ["(", "missing closing )"],
  ])("refuse %s as an invalid regex, saying why", (pattern, why) => {
    const m = containerNameMatcher(pattern);
    expect(m.ok).toBe(false);
    if (!m.ok) expect(m.message).toMatch(new RegExp(`^invalid regex: .*${why.replace(/[()]/g, "\\$&")}`));
  });

  it("refuse a pattern whose counted repetitions expand past the bound, before compiling it", () => {
    const huge = ".{1000}".repeat(146);
    expect(programBound(huge)).toBeGreaterThan(MAX_PATTERN_PROGRAM);
    const m = containerNameMatcher(huge);
    expect(m.ok).toBe(false);
    if (!m.ok) expect(m.message).toContain(`more than ${MAX_PATTERN_PROGRAM} steps`);
    expect(containerNameMatcher("[a-z]{1,63}").ok).toBe(true);
  });

  it("bound the compiled program from above, so that nothing larger is ever compiled", () => {
    const piece = fc.oneof(
      fc.constantFrom(
        "a",
        ".",
        "\\d",
        "\\pL",
        "\\p{Greek}",
        "[a-z]",
        "[^-]",
        "[]a]",
        "[[:alpha:]]",
        "\\Qa.b\\E",
      ),
      fc.constantFrom(
        "*",
        "+",
        "?",
        "*?",
        "{2}",
        "{3,}",
        "{0,9}",
        "{1,63}",
        "|",
        "(",
        ")",
        "(?:",
        "(?i)",
        "(?P<n>",
      ),
    );
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 12 }), (pieces) => {
        const pattern = pieces.join("");
        let size: number;
        try {
          size = RE2JS.compile(pattern).programSize();
        } catch {
          return; // not a pattern; the compiler says so
        }
        expect(programBound(pattern)).toBeGreaterThanOrEqual(size);
      }),
      { numRuns: 3000 },
    );
  });
});
