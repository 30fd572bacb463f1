/**
 * The agent image's JavaScript: the `hive` CLI and its resolver worker thread bundled by
 * esbuild into dist/agent/ (`hive.mjs`, `resolve-worker.mjs` and the chunks they share),
 * minified and tree-shaken. What the agent loads is then only what it uses: the
 * Kubernetes client's generated API alone held about 20 MiB of V8's heap as source and
 * bytecode, most of it for APIs the agent never calls (docs/operations.md, the agent's memory).
 *
 * Left outside: koffi, whose native binary the image keeps in node_modules, and the Pulumi
 * packages `hive render` needs, which the image never holds. Each subcommand stays a chunk of
 * its own, loaded when it runs. The worker sits beside the chunk that starts it, where
 * resolve-pool.ts looks for it; dist/agent/ is two levels under the
 * package root, as the sources are, so the BPF objects and package.json are found the same way.
 */
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { build, type Metafile } from "esbuild";

const root = join(import.meta.dirname, "..");
export const BUNDLE_DIR = join(root, "dist/agent");

/** Packages the bundle imports at run time from node_modules. */
export const BUNDLE_EXTERNAL = ["koffi", "@pulumi/*"];

export async function bundleAgent(outdir = BUNDLE_DIR): Promise<void> {
  rmSync(outdir, { recursive: true, force: true });
  const result = await build({
    absWorkingDir: root,
    entryPoints: {
      hive: "runtime/cli/main.ts",
      "resolve-worker": "runtime/discover/resolve-worker.ts",
    },
    outdir,
    bundle: true,
    splitting: true,
    format: "esm",
    platform: "node",
    target: "node22",
    outExtension: { ".js": ".mjs" },
    chunkNames: "[name]-[hash]",
    minify: true,
    // Error stacks and logs name the agent's own functions and classes.
    keepNames: true,
    legalComments: "none", // the packages' whole licenses go to THIRD-PARTY-LICENSES.txt
    metafile: true,
    external: BUNDLE_EXTERNAL,
    // CommonJS packages inside an ES module call require(): give each chunk one.
    banner: {
      js: 'import{createRequire as __hiveRequire}from"node:module";const require=__hiveRequire(import.meta.url);',
    },
    logLevel: "warning",
  });
  if (result.errors.length > 0) throw new Error(`bundling the agent failed: ${result.errors.length} errors`);
  writeFileSync(join(outdir, "THIRD-PARTY-LICENSES.txt"), thirdPartyLicenses(result.metafile));
}

/** Each bundled package's name, version and license file, in name order: what its license asks to carry. */
function thirdPartyLicenses(metafile: Metafile): string {
  const packages = new Set<string>();
  for (const input of Object.keys(metafile.inputs)) {
    const at = input.lastIndexOf("node_modules/");
    if (at < 0) continue;
    const parts = input.slice(at + "node_modules/".length).split("/");
    const name = parts[0]?.startsWith("@") ? `${parts[0]}/${parts[1]}` : (parts[0] ?? "");
    packages.add(`${input.slice(0, at)}node_modules/${name}`);
  }
  return [...packages]
    .sort((a, b) => a.localeCompare(b))
    .map((dir) => {
      const manifest = JSON.parse(readFileSync(join(root, dir, "package.json"), "utf8")) as {
        name: string;
        version: string;
        license?: string;
      };
      const file = readdirSync(join(root, dir)).find((f) => /^(licen[cs]e|copying)/i.test(f));
      const text =
        file && existsSync(join(root, dir, file)) ? readFileSync(join(root, dir, file), "utf8") : "";
      return `${manifest.name}@${manifest.version} (${manifest.license ?? "see its package"})\n\n${text.trim()}\n`;
    })
    .join(`\n${"-".repeat(72)}\n\n`);
}

if (import.meta.filename === process.argv[1]) await bundleAgent();
