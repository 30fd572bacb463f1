/**
 * Writes the published JSON Schemas derived from api/ (the alert format users validate
 * against, and the policy for editors). `--check` fails when a committed file is stale.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { AlertSchema, HivePolicySchema } from "../api/index.ts";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

export function publishedSchemas(): Record<string, string> {
  // `errorMessage` is Hive's own keyword for friendlier messages; standard validators reject it.
  const render = (schema: unknown) =>
    `${JSON.stringify(
      { $schema: "https://json-schema.org/draft/2020-12/schema", ...(schema as object) },
      (key, value) => (key === "errorMessage" ? undefined : value),
      2,
    )}\n`;
  return {
    "schemas/alert.schema.json": render(AlertSchema),
    "schemas/hivepolicy.schema.json": render({
      $id: "https://hive-operator.com/schemas/hivepolicy.schema.json",
      ...HivePolicySchema,
    }),
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const check = process.argv.includes("--check");
  let stale = 0;
  for (const [file, text] of Object.entries(publishedSchemas())) {
    const path = join(root, file);
    const current = existsSync(path) ? readFileSync(path, "utf8") : "";
    if (current === text) continue;
    if (check) {
      console.error(`${file} is out of date: run npm run gen`);
      stale++;
    } else {
      writeFileSync(path, text);
      console.log(`wrote ${file}`);
    }
  }
  process.exit(stale > 0 ? 1 : 0);
}
