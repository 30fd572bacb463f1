/**
 * Serves a Pulumi plugin directory (`plugin/`) to the engine as a resource provider, the way the
 * Pulumi CLI's Node.js host runs it (`pulumi-language-nodejs` → @pulumi/pulumi's run-plugin →
 * componentProviderHost): `require` of the directory, its component classes, the provider named
 * after its package.json. The engine starts it as the executable `pulumi-resource-hive`
 * (pluginShim) because that host is not published as a Go module version the machines here can
 * fetch; everything after the start (the gRPC provider, GetSchema, Construct) is the SDK's own.
 *
 *   node plugin-provider.ts PLUGIN_DIR ENGINE_ARGS...
 */
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";

/** Writes `<binDir>/pulumi-resource-<name>` starting this host on `pluginDir`; returns binDir. */
export function pluginShim(binDir: string, name: string, pluginDir: string): string {
  mkdirSync(binDir, { recursive: true });
  const shim = join(binDir, `pulumi-resource-${name}`);
  const node = join(import.meta.dirname, "../../node_modules/.bin/node");
  writeFileSync(shim, `#!/bin/sh\nexec '${node}' '${import.meta.filename}' '${pluginDir}' "$@"\n`);
  chmodSync(shim, 0o755);
  return binDir;
}

if (process.argv[1] === import.meta.filename) {
  const { componentProviderHost, getPulumiComponents } = await import(
    "@pulumi/pulumi/provider/experimental/index.js"
  );
  const dir = resolve(process.argv[2] ?? "");
  const { name } = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { name: string };
  // The engine's arguments (its address) are what componentProviderHost reads from argv.
  process.argv.splice(2, 1);
  await componentProviderHost({
    name,
    dirname: dir,
    components: getPulumiComponents(createRequire(import.meta.url)(dir)),
  });
}
