/**
 * The package schema the Pulumi plugin (`plugin/`) serves, computed offline by the provider's own
 * GetSchema (fixtures/plugin-host.ts). From the sources: the plugin directory staged in a temporary
 * directory, its entry points (index.js, index.ts) pointed from the compiled package
 * (`../dist/component/plugin.js`) to this repository's component/plugin.ts, so nothing needs
 * building first.
 */
import { execFile } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

const exec = promisify(execFile);
export const root = join(import.meta.dirname, "../..");
export const pluginSource = join(root, "plugin");

export interface PropertySpec {
  type?: string;
  $ref?: string;
  items?: PropertySpec;
  additionalProperties?: PropertySpec;
  plain?: boolean;
  description?: string;
}
export interface ObjectSpec {
  type?: string;
  description?: string;
  isComponent?: boolean;
  properties?: Record<string, PropertySpec>;
  required?: string[];
  inputProperties?: Record<string, PropertySpec>;
  requiredInputs?: string[];
}
export interface PackageSchema {
  name: string;
  version: string;
  resources: Record<string, ObjectSpec>;
  types: Record<string, ObjectSpec>;
}

/** GetSchema of the plugin directory `dir`, run by a Node process with `nodeArgs`. */
export async function schemaOf(dir: string, nodeArgs: string[] = []): Promise<PackageSchema> {
  const { stdout } = await exec(
    process.execPath,
    [...nodeArgs, join(import.meta.dirname, "fixtures/plugin-host.ts"), dir],
    { cwd: dir, maxBuffer: 64 * 1024 * 1024 },
  );
  return JSON.parse(stdout);
}

/** Where plugin/index.js and index.ts take the components from: the compiled package beside them. */
export const PLUGIN_COMPONENTS = "../dist/component/plugin.js";

/** `plugin/` copied to `<work>/plugin`, its entry points taking the components from this repository's sources. */
export function stagePluginSources(work: string): string {
  const dir = join(work, "plugin");
  cpSync(pluginSource, dir, { recursive: true });
  for (const entry of ["index.js", "index.ts"]) {
    const text = readFileSync(join(dir, entry), "utf8");
    if (!text.includes(PLUGIN_COMPONENTS))
      throw new Error(`plugin/${entry} no longer names ${PLUGIN_COMPONENTS}`);
    writeFileSync(join(dir, entry), text.replace(PLUGIN_COMPONENTS, join(root, "component/plugin.ts")));
  }
  const tsconfig = JSON.parse(readFileSync(join(dir, "tsconfig.json"), "utf8"));
  tsconfig.compilerOptions.allowImportingTsExtensions = true;
  writeFileSync(join(dir, "tsconfig.json"), JSON.stringify(tsconfig));
  return dir;
}

/** GetSchema of `plugin/` over this repository's sources. */
export async function sourceSchema(): Promise<PackageSchema> {
  const work = mkdtempSync(join(tmpdir(), "hive-plugin-"));
  try {
    return await schemaOf(stagePluginSources(work));
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
