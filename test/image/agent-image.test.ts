/**
 * The agent image as the Dockerfile builds it (scripts/build-image.ts: buildah, local base
 * images, no registry): it enters through `hive agent`, carries production dependencies only,
 * holds the compiled CLI and BPF object, runs its CLI, and carries no CA certificate of the
 * build host. Needs root, buildah and mmdebstrap; locally their absence skips loudly, under
 * CI=true it fails.
 */
import { execFile } from "node:child_process";
import { readdirSync, readFileSync, statSync } from "node:fs";
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
    expect([...info.entrypoint, ...info.cmd]).toEqual(["node", "dist/runtime/cli/main.js", "agent"]);
    expect(info.workingDir).toBe("/app");
    // `agent` is a command of the CLI the image holds.
    const help = await inImage([...info.entrypoint, "--help"]);
    expect(help).toMatch(/^\s+agent\s/m);
  });

  it("runs `node dist/runtime/cli/main.js --help` inside the image and exits 0", async () => {
    // execFile rejects on a non-zero exit, so resolving is the assertion on the exit code.
    const out = await inImage(["node", "dist/runtime/cli/main.js", "--help"]);
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

  it("holds the compiled CLI and the BPF object", () => {
    expect(statSync(join(rootfs, "app/dist/runtime/cli/main.js")).isFile()).toBe(true);
    const object = readFileSync(join(rootfs, "app/bpf/hive.bpf.o"));
    // An ELF file for the BPF machine (e_machine 247 at offset 18).
    expect(object.subarray(0, 4).toString("latin1")).toBe("\x7fELF");
    expect(object.readUInt16LE(18)).toBe(247);
  });

  it("has production dependencies only: no @pulumi/*, no dev tool, nothing the lock does not need", () => {
    const modules = join(rootfs, "app/node_modules");
    const installed = readdirSync(modules)
      .filter((n) => !n.startsWith("."))
      .flatMap((n) => (n.startsWith("@") ? readdirSync(join(modules, n)).map((s) => `${n}/${s}`) : [n]))
      .sort();
    expect(installed).toEqual(info.nodeModules);
    expect(installed.filter((n) => n.startsWith("@pulumi/"))).toEqual([]);
    for (const tool of ["vitest", "typescript", "@biomejs/biome", "node", "fast-check", "ajv"])
      expect(installed, tool).not.toContain(tool);

    // Against the lock: every top-level package in the image is one a production dependency
    // needs (a devDependency may appear only when one does: @types/node, via client-node),
    // and every needed one that is not platform-optional is there.
    const lock = JSON.parse(readFileSync(join(root, "package-lock.json"), "utf8")) as {
      packages: Record<string, { dev?: boolean; optional?: boolean; peer?: boolean }>;
    };
    const topLevel = Object.entries(lock.packages)
      .filter(([path]) => /^node_modules\/(@[^/]+\/)?[^/@]+$/.test(path))
      .map(([path, entry]) => ({ name: path.slice("node_modules/".length), ...entry }));
    const production = new Set(topLevel.filter((p) => !p.dev && !p.peer).map((p) => p.name));
    for (const name of installed)
      expect(production.has(name), `${name} is a production dependency`).toBe(true);
    for (const p of topLevel.filter((x) => !x.dev && !x.peer && !x.optional))
      expect(installed, `${p.name} is installed`).toContain(p.name);
  });

  it("carries nothing the agent never reads: no apt caches, type declarations or source maps", () => {
    const aptCaches = ["var/cache/apt", "var/lib/apt/lists"].flatMap((d) =>
      filesUnder(join(rootfs, d)).filter((f) => !/\/(lock|partial)$/.test(f)),
    );
    expect(aptCaches.map((f) => f.slice(rootfs.length))).toEqual([]);
    const unread = filesUnder(join(rootfs, "app/node_modules")).filter((f) => /\.(d\.[cm]?ts|map)$/.test(f));
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
