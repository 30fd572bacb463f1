/** What a built image holds: its configuration, its size and its /app/node_modules. */
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { buildah } from "./run.ts";
import { IMAGE } from "./settings.ts";

export interface ImageConfig {
  Entrypoint?: string[];
  Cmd?: string[];
  Env?: string[];
  WorkingDir?: string;
}

export async function describeImage(
  image = IMAGE,
): Promise<{ config: ImageConfig; imageBytes: number; nodeModules: string[] }> {
  const inspect = JSON.parse(await buildah(["inspect", "--type", "image", image])) as {
    OCIv1: { config?: ImageConfig };
    Manifest: string;
  };
  const manifest = JSON.parse(inspect.Manifest) as { layers: { size: number }[] };
  // The storage keeps layers uncompressed, so the manifest's sizes are the uncompressed ones.
  const imageBytes = manifest.layers.reduce((sum, l) => sum + l.size, 0);
  const ctr = (await buildah(["from", "--pull=never", image])).trim();
  try {
    const mount = (await buildah(["mount", ctr])).trim();
    const modules = join(mount, "app/node_modules");
    const nodeModules = readdirSync(modules)
      .filter((n) => !n.startsWith("."))
      .flatMap((n) => (n.startsWith("@") ? readdirSync(join(modules, n)).map((s) => `${n}/${s}`) : [n]))
      .sort();
    return { config: inspect.OCIv1.config ?? {}, imageBytes, nodeModules };
  } finally {
    await buildah(["rm", ctr]).catch(() => undefined);
  }
}
