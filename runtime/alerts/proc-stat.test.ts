import { describe, expect, it } from "vitest";
import { parseStatField } from "./proc-stat.ts";

describe("/proc/<pid>/stat parsing", () => {
  it("finds the fields after the last parenthesis, whatever the process calls itself", () => {
    expect(parseStatField("4242 (cat) R 17 4242 17 0 -1", 4)).toBe("17");
    expect(parseStatField("4242 (evil) S 1 (x) R 99 4242) S 31337 1 1", 4)).toBe("31337");
    expect(parseStatField("4242 (a b\nc) S 5 6", 4)).toBe("5");
    expect(parseStatField("4242 no parens at all", 4)).toBeUndefined();
    expect(parseStatField("4242 (x) 7 1", 4)).toBeUndefined(); // no state letter: not a stat line
    expect(parseStatField("", 4)).toBeUndefined();
  });
});
