/**
 * The host's network settings for the build steps only: its npm registry and CA bundle reach
 * the Dockerfile's RUN steps as a build argument and a read-only mount, never the image.
 */
import { copyFileSync, existsSync, mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { run } from "./run.ts";
import { cacheDir } from "./settings.ts";

/** Trimmed output of the host's npm (`npm config get KEY`), or undefined when unset. */
async function npmConfig(key: string): Promise<string | undefined> {
  const value = (await run("npm", ["config", "get", key]).catch(() => "")).trim();
  return value === "" || value === "null" || value === "undefined" ? undefined : value;
}

/**
 * Build arguments and mounts that carry the host's network settings into the build steps
 * only: the npm registry as the build stage's `npm_config_registry`, and a CA bundle (npm's
 * cafile, else NODE_EXTRA_CA_CERTS, else SSL_CERT_FILE) mounted read-only on /mnt — a
 * directory every Debian image has, so the mount leaves no mount point behind in a layer.
 */
export async function networkFlags(): Promise<string[]> {
  const flags: string[] = [];
  const registry = await npmConfig("registry");
  if (registry) flags.push("--build-arg", `npm_config_registry=${registry}`);
  const bundle = [await npmConfig("cafile"), process.env.NODE_EXTRA_CA_CERTS, process.env.SSL_CERT_FILE].find(
    (p) => p !== undefined && p !== "" && existsSync(p),
  );
  if (bundle) {
    const dir = join(cacheDir, "build-ca");
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    copyFileSync(bundle, join(dir, "ca.pem"));
    flags.push("--volume", `${dir}:/mnt:ro`, "--build-arg", "NODE_EXTRA_CA_CERTS=/mnt/ca.pem");
  }
  return flags;
}
