/** The hash over everything the image is made from: an unchanged hash skips the build. */
import { createHash } from "node:crypto";
import { createReadStream, existsSync, readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { root } from "./settings.ts";

export function sha256(data: string | Buffer): string {
  return createHash("sha256").update(data).digest("hex");
}

export async function fileSha256(path: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

function walk(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name));
}

/** The files the image is made from, as the Dockerfile copies them, plus the build script and its steps. */
function inputFiles(): string[] {
  const top = ["Dockerfile", ".dockerignore", "package.json", "package-lock.json"].map((f) => join(root, f));
  const tsconfigs = readdirSync(root)
    .filter((f) => /^tsconfig.*\.json$/.test(f))
    .map((f) => join(root, f));
  const trees = ["api", "component", "runtime"].flatMap((d) => walk(join(root, d)));
  const bpf = readdirSync(join(root, "bpf"))
    .filter((f) => /\.(c|h)$/.test(f) || f === "build.sh")
    .map((f) => join(root, "bpf", f));
  const script = [
    join(root, "scripts/build-image.ts"),
    join(root, "scripts/bundle-agent.ts"),
    ...walk(join(root, "scripts/image")),
  ];
  return [...top, ...tsconfigs, ...trees, ...bpf, ...script].sort();
}

/** The inputs' hash, with `extra` (the base images' ids) mixed in. */
export function hashInputs(extra: unknown): string {
  const hash = createHash("sha256");
  for (const file of inputFiles()) hash.update(`${relative(root, file)}\0${sha256(readFileSync(file))}\n`);
  hash.update(JSON.stringify(extra));
  return hash.digest("hex");
}
