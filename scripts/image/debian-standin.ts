/**
 * The Debian base stand-in: a slim Debian tree made by mmdebstrap from the host's mirror,
 * committed as one layer.
 */
import { mkdirSync, readdirSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { debianSources } from "./debian-sources.ts";
import { sha256 } from "./inputs.ts";
import { run } from "./run.ts";
import { cacheDir } from "./settings.ts";
import { commitTree, STANDIN_RECIPE, standin } from "./standin.ts";

/**
 * mmdebstrap options making a Debian tree as the public slim image is: no documentation, manuals
 * or translations, merged /usr by symlinks (as debootstrap makes it; without them bookworm's
 * init-system-helpers pulls in usrmerge and with it perl).
 */
export const slimDebianOptions = (mode: "root" | "chrootless"): string[] => [
  "--variant=minbase",
  `--mode=${mode}`,
  "--format=directory",
  "--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr",
  ...[
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
    "path-exclude=/usr/share/info/*",
    "path-exclude=/usr/share/locale/*",
    "path-exclude=/usr/share/lintian/*",
  ].map((o) => `--dpkgopt=${o}`),
];

export async function debianStandin(name: string, suite: string): Promise<string> {
  const sources = debianSources(suite);
  const options = slimDebianOptions("root");
  const key = sha256(JSON.stringify({ STANDIN_RECIPE, suite, sources, options }));
  return standin(name, key, async () => {
    const rootfs = join(cacheDir, "stage", "debian");
    rmSync(rootfs, { recursive: true, force: true });
    mkdirSync(dirname(rootfs), { recursive: true });
    await run("mmdebstrap", [...options, suite, rootfs, ...sources]);
    // Image layers carry no device nodes: the container runtime provides /dev.
    for (const entry of readdirSync(join(rootfs, "dev")))
      rmSync(join(rootfs, "dev", entry), { recursive: true });
    const config = [
      "--env",
      "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
      "--cmd",
      '["bash"]',
    ];
    await commitTree("scratch", rootfs, config, name);
    rmSync(rootfs, { recursive: true, force: true });
  });
}
