/**
 * The README's TypeScript snippets that use the package are programs users paste: each one
 * must type-check against the package's public types, like the examples.
 */
import { execFile } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const root = join(import.meta.dirname, "../..");
const PACKAGE = JSON.parse(readFileSync(join(root, "package.json"), "utf8")).name as string;

function snippets(markdown: string): string[] {
  return [...markdown.matchAll(/```(?:ts|typescript)\n([\s\S]*?)```/g)]
    .map((m) => m[1] as string)
    .filter((code) => code.includes(`from "${PACKAGE}"`));
}

describe("README", () => {
  it("has a Pulumi quick start whose code type-checks against the package", async () => {
    const found = snippets(readFileSync(join(root, "README.md"), "utf8"));
    expect(found.length, `a \`\`\`ts block importing "${PACKAGE}"`).toBeGreaterThan(0);
    // Inside the repository, so the package's self-reference resolves to its sources.
    const dir = join(root, ".tmp", `readme-snippets-${process.pid}`);
    mkdirSync(dir, { recursive: true });
    try {
      for (const [i, code] of found.entries())
        writeFileSync(join(dir, `snippet-${i + 1}.ts`), `${code}\nexport {};\n`);
      writeFileSync(
        join(dir, "tsconfig.json"),
        JSON.stringify({ extends: "../../tsconfig.json", compilerOptions: { noEmit: true }, include: ["."] }),
      );
      const result = await promisify(execFile)(join(root, "node_modules/.bin/tsc"), ["-p", dir], {
        cwd: root,
      }).catch((e) => e);
      const output = `${result.stdout ?? ""}${result.stderr ?? ""}`;
      // "….tmp/readme-snippets-N/snippet-1.ts(4,3)" → "README snippet 1 (4,3)"
      expect(output.replace(/\S*readme-snippets-\d+\/snippet-(\d+)\.ts/g, "README snippet $1 ")).toBe("");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
