/**
 * The agent image as the Dockerfile builds it (scripts/build-image.ts: buildah, local base
 * images, no registry): it enters through `hive agent`, holds the bundled CLI, koffi and the BPF
 * object and nothing else of node_modules, runs its CLI, and carries no CA certificate of the
 * build host. Needs root, buildah and mmdebstrap; locally their absence skips loudly, under
 * CI=true it fails.
 */
import { execFile } from "node:child_process";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildahStorageFlags } from "../../scripts/buildah-storage.ts";
import { type AgentImageInfo, ensureAgentImage, imageSuiteGate } from "./agent-image.ts";

const run = promisify(execFile);
const root = join(import.meta.dirname, "../..");
const enabled = imageSuiteGate();

let info: AgentImageInfo;
let container = "";
let rootfs = "";
const buildah = async (args: string[]) => {
  return (
    await run("buildah", [...buildahStorageFlags(info.storage), ...args], { maxBuffer: 16 * 2 ** 20 })
  ).stdout.trim();
};
/** Runs a command in a container of the image (its WorkingDir, /app). */
const inImage = (args: string[]) => buildah(["run", "--isolation", "chroot", container, "--", ...args]);

/** The final stage's `ENTRYPOINT [...]` / `CMD [...]` (the last of each in the Dockerfile). */
function dockerfileJson(op: string): string[] {
  const lines = readFileSync(join(root, "Dockerfile"), "utf8")
    .split("\n")
    .filter((l) => l.toUpperCase().startsWith(`${op} `));
  return JSON.parse((lines.at(-1) ?? "").slice(op.length + 1)) as string[];
}

/** Base64 bodies of the PEM certificates in a text. */
function pemBodies(text: string): string[] {
  const blocks = text.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
  return blocks.map((b) => b.replace(/-----[A-Z ]+-----|\s/g, ""));
}

/** Regular files under `dir`, never through a symlink (the image's /var/run points at the host's /run). */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return filesUnder(path);
    return e.isFile() ? [path] : [];
  });
}

/** Of these image paths, those the Node base image lacks or has with other content. */
async function notInNodeBase(paths: string[]): Promise<string[]> {
  const base = Object.entries(info.baseImages).find(([name]) => name.includes("/node:"))?.[1];
  if (!base) throw new Error(`no Node base image in ${JSON.stringify(info.baseImages)}`);
  const ctr = await buildah(["from", "--pull=never", base]);
  try {
    const baseRoot = await buildah(["mount", ctr]);
    return paths.filter((p) => {
      try {
        return !readFileSync(join(baseRoot, p)).equals(readFileSync(join(rootfs, p)));
      } catch {
        return true;
      }
    });
  } finally {
    await buildah(["rm", ctr]);
  }
}

describe.skipIf(!enabled)("the agent image built from the Dockerfile", () => {
  beforeAll(async () => {
    info = await ensureAgentImage();
    container = await buildah(["from", "--pull=never", info.image]);
    rootfs = await buildah(["mount", container]);
  }, 1_800_000);

  afterAll(async () => {
    if (container) await buildah(["rm", container]);
  }, 120_000);

  it("enters through `hive agent`, as the Dockerfile says", async () => {
    expect(info.entrypoint).toEqual(dockerfileJson("ENTRYPOINT"));
    expect(info.cmd).toEqual(dockerfileJson("CMD"));
    expect([...info.entrypoint, ...info.cmd]).toEqual(["node", "dist/agent/hive.mjs", "agent"]);
    expect(info.workingDir).toBe("/app");
    // `agent` is a command of the CLI the image holds.
    const help = await inImage([...info.entrypoint, "--help"]);
    expect(help).toMatch(/^\s+agent\s/m);
  });

  it("runs `node dist/agent/hive.mjs --help` inside the image and exits 0", async () => {
    // execFile rejects on a non-zero exit, so resolving is the assertion on the exit code.
    const out = await inImage(["node", "dist/agent/hive.mjs", "--help"]);
    expect(out).toContain("Usage: hive COMMAND");
    expect(await inImage(["node", "--version"])).toMatch(/^v24\./);
  });

  it("loads libbpf through koffi without any install script having run", async () => {
    const out = await inImage([
      "node",
      "--input-type=module",
      "-e",
      "const k = (await import('koffi')).default; k.load('libbpf.so.1'); console.log('libbpf loaded')",
    ]);
    expect(out).toBe("libbpf loaded");
  });

  it("holds the bundled CLI, its resolver worker, the licenses of what it bundles, and the BPF object", () => {
    for (const file of ["hive.mjs", "resolve-worker.mjs"])
      expect(statSync(join(rootfs, "app/dist/agent", file)).isFile(), file).toBe(true);
    const licenses = readFileSync(join(rootfs, "app/dist/agent/THIRD-PARTY-LICENSES.txt"), "utf8");
    expect(licenses).toMatch(/^@kubernetes\/client-node@\S+ \(Apache-2\.0\)$/m);
    // The sources' layout is not in the image: only the bundle runs.
    expect(existsSync(join(rootfs, "app/dist/runtime"))).toBe(false);
    const object = readFileSync(join(rootfs, "app/bpf/hive.bpf.o"));
    // An ELF file for the BPF machine (e_machine 247 at offset 18).
    expect(object.subarray(0, 4).toString("latin1")).toBe("\x7fELF");
    expect(object.readUInt16LE(18)).toBe(247);
  });

  it("has only what the bundle leaves outside in node_modules: koffi and its binary for this platform", () => {
    const modules = join(rootfs, "app/node_modules");
    const installed = readdirSync(modules)
      .filter((n) => !n.startsWith("."))
      .flatMap((n) => (n.startsWith("@") ? readdirSync(join(modules, n)).map((s) => `${n}/${s}`) : [n]))
      .sort();
    expect(installed).toEqual(info.nodeModules);
    expect(installed).toEqual(["@koromix/koffi-linux-x64", "koffi"]);
    // The version the lock pins, not another one.
    const lock = JSON.parse(readFileSync(join(root, "package-lock.json"), "utf8")) as {
      packages: Record<string, { version?: string }>;
    };
    const version = (name: string) =>
      (JSON.parse(readFileSync(join(modules, name, "package.json"), "utf8")) as { version: string }).version;
    for (const name of installed)
      expect(version(name), name).toBe(lock.packages[`node_modules/${name}`]?.version);
  });

  it("carries nothing the agent never reads: no apt caches, type declarations or source maps", () => {
    const aptCaches = ["var/cache/apt", "var/lib/apt/lists"].flatMap((d) =>
      filesUnder(join(rootfs, d)).filter((f) => !/\/(lock|partial)$/.test(f)),
    );
    expect(aptCaches.map((f) => f.slice(rootfs.length))).toEqual([]);
    const unread = filesUnder(join(rootfs, "app")).filter((f) => /\.(d\.[cm]?ts|map)$/.test(f));
    expect(unread.map((f) => f.slice(rootfs.length)).slice(0, 10)).toEqual([]);
  });

  it("carries no CA certificate of the build host and no build-time network setting", async () => {
    // The build host's bundles (which include any TLS-intercepting CA of its network).
    const hostBundles = [
      process.env.NODE_EXTRA_CA_CERTS,
      process.env.SSL_CERT_FILE,
      "/etc/ssl/certs/ca-certificates.crt",
    ].filter((p): p is string => p !== undefined && p !== "");
    const hostCerts = new Set(
      hostBundles.flatMap((p) => {
        try {
          return pemBodies(readFileSync(p, "utf8"));
        } catch {
          return [];
        }
      }),
    );
    expect(hostCerts.size, "the host has a CA bundle to compare with").toBeGreaterThan(0);
    // Every file of the image that holds one of those certificates…
    const holders: string[] = [];
    for (const file of filesUnder(rootfs)) {
      if (statSync(file).size > 8 * 2 ** 20) continue;
      const text = readFileSync(file, "latin1");
      if (!text.includes("-----BEGIN CERTIFICATE-----")) continue;
      if (pemBodies(text).some((b) => hostCerts.has(b))) holders.push(file.slice(rootfs.length));
    }
    // …unless the Node base image has the same file (public CAs a base may ship).
    const leaks = holders.length === 0 ? [] : await notInNodeBase(holders);
    expect(leaks).toEqual([]);
    // The build's CA mount point (/mnt) is left as the base image has it: empty.
    expect(readdirSync(join(rootfs, "mnt"))).toEqual([]);
    // Build arguments of the build stage stay there: not in the image's config or history.
    const image = await buildah(["inspect", "--type", "image", info.image]);
    expect(image).not.toMatch(/NODE_EXTRA_CA_CERTS|npm_config_registry|\/mnt\/ca\.pem/);
  });
});
