/**
 * The package's version (`app.kubernetes.io/version` on every object), read from its own
 * package.json: found upwards from this file both in the sources (component/) and in the
 * compiled package (dist/component/).
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";

export const PACKAGE_NAME = "@hive-operator/hive";

function findVersion(): string {
  for (let dir = import.meta.dirname; ; dir = dirname(dir)) {
    const file = join(dir, "package.json");
    if (existsSync(file)) {
      const manifest = JSON.parse(readFileSync(file, "utf8")) as { name?: string; version?: string };
      if (manifest.name === PACKAGE_NAME && manifest.version) return manifest.version;
    }
    if (dirname(dir) === dir) return "unknown";
  }
}

export const PACKAGE_VERSION = findVersion();
