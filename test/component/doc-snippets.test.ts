/**
 * The TypeScript snippets of the documentation (README.md and docs/*.md) that use the package
 * are programs users paste: each one must type-check against the package's public types, like
 * the examples. A snippet that breaks is named by its page and line.
 */
import { execFile } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const root = join(import.meta.dirname, "../..");
const PACKAGE = JSON.parse(readFileSync(join(root, "package.json"), "utf8")).name as string;
const PAGES = [
  "README.md",
  ...readdirSync(join(root, "docs"))
    .filter((f) => f.endsWith(".md"))
    .map((f) => `docs/${f}`),
];

interface Snippet {
  /** `page:line` of the block's first code line. */
  where: string;
  code: string;
}

function snippets(page: string, markdown: string): Snippet[] {
  return [...markdown.matchAll(/^```(?:ts|typescript)\n([\s\S]*?)^```/gm)]
    .map((m) => ({
      where: `${page}:${markdown.slice(0, m.index).split("\n").length + 1}`,
      code: m[1] as string,
    }))
    .filter((s) => s.code.includes(`from "${PACKAGE}"`));
}

/** Type-checks the snippets as one project inside the repository; returns tsc's output. */
async function typeCheck(found: Snippet[]): Promise<string> {
  // Inside the repository, so the package's self-reference resolves to its sources.
  const dir = join(root, ".tmp", `doc-snippets-${process.pid}`);
  mkdirSync(dir, { recursive: true });
  try {
    for (const [i, s] of found.entries())
      writeFileSync(join(dir, `snippet-${i}.ts`), `${s.code}\nexport {};\n`);
    writeFileSync(
      join(dir, "tsconfig.json"),
      JSON.stringify({ extends: "../../tsconfig.json", compilerOptions: { noEmit: true }, include: ["."] }),
    );
    const result = await promisify(execFile)(join(root, "node_modules/.bin/tsc"), ["-p", dir], {
      cwd: root,
    }).catch((e) => e);
    const output = `${result.stdout ?? ""}${result.stderr ?? ""}`;
    // "….tmp/doc-snippets-N/snippet-3.ts(4,3)" → "docs/component.md:52 (snippet line 4, column 3)"
    return output.replace(
      /\S*doc-snippets-\d+\/snippet-(\d+)\.ts\((\d+),(\d+)\)/g,
      (_, i, line, column) => `${found[Number(i)]?.where} (snippet line ${line}, column ${column})`,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe("documentation snippets", () => {
  const found = PAGES.flatMap((page) => snippets(page, readFileSync(join(root, page), "utf8")));

  it("include the README's Pulumi quick start and the component page's programs", () => {
    const pages = new Set(found.map((s) => s.where.split(":")[0]));
    expect(pages).toContain("README.md");
    expect(pages).toContain("docs/component.md");
  });

  it("type-check against the package", async () => {
    expect(await typeCheck(found)).toBe("");
  }, 120_000);

  it("fail the check when a snippet uses the package wrongly", async () => {
    const [first] = found;
    if (!first) throw new Error("no snippet found");
    const broken = { where: first.where, code: first.code.replace(/image:/, "imag:") };
    expect(broken.code).not.toBe(first.code);
    expect(await typeCheck([broken])).toContain(`${first.where} (snippet line`);
  }, 120_000);
});
