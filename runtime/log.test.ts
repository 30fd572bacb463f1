import { describe, expect, it } from "vitest";
import { HiveError } from "../api/errors.ts";
import { UNSAFE_TEXT } from "../test/fixtures/hostile-text.ts";
import { createLogger } from "./log.ts";

describe("logger", () => {
  it("writes text a container chose (comm, paths, symlink targets) as one escaped, bounded line", () => {
    const lines: string[] = [];
    const log = createLogger({ component: "discover" }, { level: "debug", sink: (l) => lines.push(l) });
    const path = `/etc/${"\u202e".repeat(4096)}`;
    const error = new HiveError(
      "FileNotFound",
      `/x -> \n{"level":"error","msg":"forged"}\x1b[2J does not exist`,
      {
        object: path,
        symlinks: Array.from({ length: 100 }, () => `/l -> ${"y".repeat(4096)}`),
      },
    );
    log.warn(`resolving ${path}`, { comm: "\n\x1b[31mevil\u0000", path, error });
    expect(lines).toHaveLength(1);
    const line = lines[0] as string;
    expect(line).not.toMatch(/[\n\r]/);
    expect(line.length).toBeLessThan(64 * 1024);
    const record = JSON.parse(line) as Record<string, unknown> & { error: Record<string, unknown> };
    const decoded = JSON.stringify(record, (_k, v) => v);
    // Escaped in the value itself, not only by JSON: a log viewer that decodes the JSON shows no control or bidi character.
    for (const value of [record.msg, record.comm, record.path, record.error.message, record.error.object])
      expect(String(value)).not.toMatch(UNSAFE_TEXT);
    expect(record.comm).toBe("\\n\\x1b[31mevil\\x00");
    expect(String(record.path).length).toBeLessThanOrEqual(1024);
    expect(record.error.code).toBe("FileNotFound");
    expect(record.component).toBe("discover");
    expect(decoded.length).toBeLessThan(64 * 1024);
  });

  it("keeps ordinary fields as they are", () => {
    const lines: string[] = [];
    createLogger({}, { sink: (l) => lines.push(l) }).info("watch resumed", {
      resourceVersion: "42",
      n: 3,
      ok: true,
    });
    expect(JSON.parse(lines[0] as string)).toMatchObject({
      msg: "watch resumed",
      resourceVersion: "42",
      n: 3,
      ok: true,
    });
  });
});
