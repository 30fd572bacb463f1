/**
 * The user documentation (README.md, SECURITY.md and docs/*.md) against the code: tables that name exit and
 * error codes, the developer commands, the HivePolicy and alert examples (validated by the one
 * schema definition in api/), and every link between the pages.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { ERROR_CODES } from "../../api/errors.ts";
import { validateAlert, validatePolicy } from "../../api/index.ts";
import { EXIT } from "../../runtime/cli/exit-codes.ts";

const root = join(import.meta.dirname, "../..");
const pages = [
  "README.md",
  "SECURITY.md",
  ...readdirSync(join(root, "docs"))
    .filter((f) => f.endsWith(".md"))
    .map((f) => `docs/${f}`),
];
const read = (page: string) => readFileSync(join(root, page), "utf8");

function section(page: string, title: string): string {
  const text = read(page);
  const start = text.indexOf(`## ${title}\n`);
  if (start < 0) throw new Error(`${page} has no "## ${title}" section`);
  const end = text.indexOf("\n## ", start + 1);
  return text.slice(start, end < 0 ? undefined : end);
}

/** Fenced blocks of one language, with the page and line they start on. */
function blocks(language: string): { where: string; code: string }[] {
  return pages.flatMap((page) =>
    [...read(page).matchAll(new RegExp(`^\`\`\`${language}\\n([\\s\\S]*?)^\`\`\``, "gm"))].map((m) => ({
      where: `${page}:${read(page).slice(0, m.index).split("\n").length}`,
      code: m[1] as string,
    })),
  );
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens. */
function anchorOf(heading: string): string {
  return heading
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, "")
    .replace(/ /g, "-");
}

function anchorsOf(file: string): Set<string> {
  const text = readFileSync(file, "utf8").replace(/^```[\s\S]*?^```/gm, "");
  return new Set([...text.matchAll(/^#+ (.+)$/gm)].map((m) => anchorOf(m[1] as string)));
}

describe("the documentation", () => {
  it("documents exactly the exit codes the command uses", () => {
    const documented = [...section("docs/cli.md", "Exit codes").matchAll(/^\| (\d+) *\|/gm)].map((m) =>
      Number(m[1]),
    );
    expect(documented).toEqual([...new Set(Object.values(EXIT))].sort((a, b) => a - b));
  });

  it("names only error codes that exist, in the troubleshooting table", () => {
    const named = [
      ...section("docs/troubleshooting.md", "Error codes").matchAll(/^\| `(\w+)`(?: \/ `(\w+)`)? *\|/gm),
    ].flatMap((m) => [m[1], m[2]].filter((c): c is string => c !== undefined));
    expect(named.length).toBeGreaterThan(10);
    for (const code of named) expect(ERROR_CODES).toContain(code);
  });

  it("keeps 'From a fresh clone' to the two commands", () => {
    const commands =
      section("docs/development.md", "From a fresh clone").match(/```sh\n([\s\S]*?)```/)?.[1] ?? "";
    expect(
      commands
        .split("\n")
        .filter(Boolean)
        .map((l) => l.split("#")[0]?.trim()),
    ).toEqual(["npm run demo", "npm test"]);
  });

  it("shows only HivePolicies the CRD's rules accept", () => {
    const policies = blocks("yaml").filter((b) => /^kind: HivePolicy$/m.test(b.code));
    expect(policies.length).toBeGreaterThan(0);
    for (const { where, code } of policies) {
      const result = validatePolicy(parse(code));
      expect(result.ok ? [] : result.errors, where).toEqual([]);
    }
  });

  it("shows alerts the alert schema accepts", () => {
    const alerts = blocks("json").filter(
      (b) => b.code.trimStart().startsWith("{") && b.code.includes('"hive_policy_name"'),
    );
    expect(alerts.length).toBeGreaterThanOrEqual(2); // the README's and the alerts page's
    for (const { where, code } of alerts) {
      const result = validateAlert(JSON.parse(code));
      expect(result.ok ? [] : result.errors, where).toEqual([]);
    }
  });

  it("links only to files and headings that exist", () => {
    const broken: string[] = [];
    for (const page of pages) {
      const text = read(page).replace(/^```[\s\S]*?^```/gm, "");
      for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = m[1] as string;
        if (/^[a-z]+:/.test(target)) continue; // https:, mailto:
        const [path = "", anchor] = target.split("#");
        const file = path === "" ? join(root, page) : join(root, dirname(page), path);
        if (!existsSync(file)) broken.push(`${page}: ${target} (no ${relative(root, file)})`);
        else if (anchor !== undefined && file.endsWith(".md") && !anchorsOf(file).has(anchor))
          broken.push(`${page}: ${target} (no heading #${anchor})`);
      }
    }
    expect(broken).toEqual([]);
  });
});
