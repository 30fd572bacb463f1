/**
 * `npm run bench [part...]`: runs every bench/<part>.ts that exports `run()`, one after the
 * other (all of them by default, or only the named parts), and prints what each reports.
 * Each part prints its own figures and says how to reproduce them; this file only dispatches.
 */
import { readdirSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

interface BenchPart {
  run(): Promise<unknown> | unknown;
}

const here = dirname(fileURLToPath(import.meta.url));
const wanted = process.argv.slice(2);
const parts = readdirSync(here)
  .filter((f) => f.endsWith(".ts") && f !== "main.ts" && !f.endsWith(".test.ts"))
  .map((f) => basename(f, ".ts"))
  .filter((name) => wanted.length === 0 || wanted.includes(name))
  .sort();

if (wanted.length > 0 && parts.length !== wanted.length) {
  const missing = wanted.filter((w) => !parts.includes(w));
  console.error(`unknown bench part(s): ${missing.join(", ")}`);
  process.exit(2);
}

let failed = false;
for (const name of parts) {
  const mod = (await import(pathToFileURL(join(here, `${name}.ts`)).href)) as Partial<BenchPart>;
  if (typeof mod.run !== "function") continue;
  console.log(`\n=== bench: ${name} ===`);
  const started = performance.now();
  try {
    await mod.run();
    console.log(`=== ${name}: done in ${((performance.now() - started) / 1000).toFixed(1)} s ===`);
  } catch (error) {
    failed = true;
    console.error(`=== ${name}: FAILED ===`);
    console.error(error);
  }
}
process.exit(failed ? 1 : 0);
