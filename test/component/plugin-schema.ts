/**
 * The package schema the Pulumi plugin (`plugin/`) serves, computed offline by the provider's own
 * GetSchema (fixtures/plugin-host.ts). From the sources: the plugin directory staged in a temporary
 * directory whose `@hive-operator/hive` is this repository, resolved through the "hive-source"
 * export condition (for TypeScript too), so nothing needs building first.
 */
import { execFile } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
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

/** GetSchema of `plugin/` over this repository's sources. */
export async function sourceSchema(): Promise<PackageSchema> {
  const work = mkdtempSync(join(tmpdir(), "hive-plugin-"));
  try {
    const dir = join(work, "plugin");
    cpSync(pluginSource, dir, { recursive: true });
    const tsconfig = JSON.parse(readFileSync(join(dir, "tsconfig.json"), "utf8"));
    tsconfig.compilerOptions.customConditions = ["hive-source"];
    writeFileSync(join(dir, "tsconfig.json"), JSON.stringify(tsconfig));
    const link = (name: string, target: string) => {
      mkdirSync(dirname(join(dir, "node_modules", name)), { recursive: true });
      symlinkSync(target, join(dir, "node_modules", name));
    };
    link("@hive-operator/hive", root);
    for (const dep of ["@pulumi/pulumi", "@pulumi/kubernetes"]) link(dep, join(root, "node_modules", dep));
    return await schemaOf(dir, ["--conditions=hive-source"]);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
