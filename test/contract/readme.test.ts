import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { EXIT } from "../../runtime/cli/exit-codes.ts";
import { ERROR_CODES } from "../../runtime/errors.ts";

const snippet = readFileSync(new URL("../../README.md", import.meta.url), "utf8");

function section(title: string): string {
  const start = snippet.indexOf(`## ${title}\n`);
  if (start < 0) throw new Error(`README has no "## ${title}" section`);
  const end = snippet.indexOf("\n## ", start + 1);
  return snippet.slice(start, end < 0 ? undefined : end);
}

describe("the README", () => {
  it("document exactly the exit codes the command uses", () => {
    const documented = [...section("Exit codes").matchAll(/^\| (\d+) *\|/gm)].map((m) => Number(m[1]));
    expect(documented).toEqual([...new Set(Object.values(EXIT))].sort((a, b) => a - b));
  });

  it("name only error codes that exist, in the troubleshooting table", () => {
    const named = [...section("Troubleshooting").matchAll(/^\| `(\w+)`(?: \/ `(\w+)`)? *\|/gm)].flatMap((m) =>
      [m[1], m[2]].filter((c): c is string => c !== undefined),
    );
    expect(named.length).toBeGreaterThan(10);
    for (const code of named) expect(ERROR_CODES).toContain(code);
  });

  it("keep 'From a fresh clone' to the two commands", () => {
    const commands = section("From a fresh clone").match(/```sh\n([\s\S]*?)```/)?.[1] ?? "";
    expect(
      commands
        .split("\n")
        .filter(Boolean)
        .map((l) => l.split("#")[0]?.trim()),
    ).toEqual(["npm run demo", "npm test"]);
  });
});
