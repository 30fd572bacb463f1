import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const run = promisify(execFile);
const root = new URL("../../", import.meta.url).pathname;

async function check(command: string, args: string[]): Promise<string> {
  try {
    await run(command, args, { cwd: root, maxBuffer: 16 * 1024 * 1024 });
    return "";
  } catch (error) {
    const { stdout = "", stderr = "" } = error as { stdout?: string; stderr?: string };
    return `${stdout}${stderr}`.trim() || String(error);
  }
}

describe("the sources", () => {
  it("type-check under the strict tsconfig", { timeout: 180_000 }, async () => {
    expect(await check("tsc", ["-p", "tsconfig.json"])).toBe("");
  });

  it("pass the linter and formatter", { timeout: 120_000 }, async () => {
    expect(await check("biome", ["check", "."])).toBe("");
  });
});
