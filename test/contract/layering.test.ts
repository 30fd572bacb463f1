/**
 * The folders' dependency direction: `api/` (the contracts) imports nothing of Hive's other
 * folders; `component/` (the Pulumi package) never imports the agent (`runtime/`); `runtime/`
 * imports the component only in `runtime/cli`, whose `hive render` prints the component's
 * objects. Read from every source file's static and dynamic imports.
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const root = resolve(import.meta.dirname, "../..");
const IMPORT = /(?:\bfrom\s*|\bimport\s*\(\s*|^\s*import\s+)["'](\.{1,2}\/[^"']+)["']/gm;

function sources(dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && /\.(ts|mts)$/.test(e.name) && !/\.test\.ts$/.test(e.name))
    .map((e) => relative(root, join(e.parentPath, e.name)));
}

/** Every (file, imported file) pair of `dir`'s non-test sources, as paths from the repository root. */
function imports(dir: string): [string, string][] {
  return sources(dir).flatMap((file) =>
    [...readFileSync(join(root, file), "utf8").matchAll(IMPORT)].map(
      (m) => [file, relative(root, resolve(root, dirname(file), m[1] as string))] as [string, string],
    ),
  );
}

const into = (pairs: [string, string][], folder: string) =>
  pairs.filter(([, to]) => to.startsWith(`${folder}/`));

describe("the folders' dependency direction", () => {
  it("finds the imports it checks", () => {
    expect(imports("runtime").length).toBeGreaterThan(500);
    expect(into(imports("runtime"), "api").length).toBeGreaterThan(50);
  });

  it("api/ imports nothing of the component, the runtime, the scripts or the tests", () => {
    const out = imports("api").filter(([, to]) => !to.startsWith("api/"));
    expect(out).toEqual([]);
  });

  it("component/ never imports runtime/ (the Pulumi package does not carry the agent)", () => {
    expect(into(imports("component"), "runtime")).toEqual([]);
  });

  it("runtime/ imports component/ only for `hive render` (runtime/cli)", () => {
    const outside = into(imports("runtime"), "component").filter(
      ([from]) => !from.startsWith("runtime/cli/"),
    );
    expect(outside).toEqual([]);
  });
});
