/**
 * Neither a container's writable layer nor another image's layer steers what is armed for every
 * image (the attack: a process in any container runs `rm /etc/shadow; ln -s /usr/lib/libc.so.6
 * /etc/shadow`, or a tenant runs an image whose layer holds that symlink, and the next rescan
 * armed the base layer's libc as the /etc/shadow trap of every image built on it). A real
 * containerd with its overlayfs snapshotter: an image layer unpacked and committed, a container's
 * ACTIVE snapshot over it that holds the symlink, and a second namespace's container with a copy
 * of the path of its own; then two images over the same base, one with a tool where the base's
 * `/bin` symlink leads, one whose committed layer links the trapped path to the base's libc.
 */
import { execFile } from "node:child_process";
import { mkdirSync, readdirSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findInLayers, layerDirs } from "../../runtime/discover/image-layers.ts";
import { createLayerFinder } from "../../runtime/discover/layer-finder.ts";
import { containerdWritableDirs } from "../../runtime/discover/writable-layers.ts";
import { createLogger } from "../../runtime/log.ts";
import { type Containerd, containerSuiteGate, startContainerd } from "./containerd-harness.ts";

const run = promisify(execFile);
const runs = containerSuiteGate();

describe.runIf(runs)("the image layers searched for a trap path", () => {
  let cd: Containerd;
  let snapshotsDir: string;
  const ctr = (namespace: string, ...args: string[]) =>
    run("/usr/bin/ctr", ["--address", cd.socket, "--namespace", namespace, ...args]);
  /** Prepares a snapshot and returns its new directory's name. */
  const prepare = async (namespace: string, key: string, parent?: string) => {
    const before = new Set(layerDirs(snapshotsDir));
    await ctr(namespace, "snapshots", "prepare", key, ...(parent ? [parent] : []));
    const made = layerDirs(snapshotsDir).filter((d) => !before.has(d));
    if (made.length !== 1) throw new Error(`prepare ${key} made ${made.length} directories`);
    return made[0] as string;
  };
  let imageShadow: bigint;
  /** The agent's layer finder over this containerd, asking it which snapshots are writable. */
  const agentFinder = () =>
    createLayerFinder({
      snapshotsDir,
      log: createLogger({}, { level: "error" }),
      onChange: () => undefined,
      writable: containerdWritableDirs({ socket: cd.socket }),
    });

  beforeAll(async () => {
    cd = await startContainerd({ namespace: "k8s.io" });
    snapshotsDir = join(cd.dir, "root/io.containerd.snapshotter.v1.overlayfs/snapshots");
    // An image layer, as an unpack writes and commits it.
    const layer = await prepare("k8s.io", "unpack-1");
    const fs = join(snapshotsDir, layer, "fs");
    mkdirSync(join(fs, "etc"), { recursive: true });
    mkdirSync(join(fs, "usr/lib"), { recursive: true });
    symlinkSync("usr/bin", join(fs, "bin")); // merged /usr
    writeFileSync(join(fs, "etc/shadow"), "root:*:19000:0:99999:7:::\n");
    writeFileSync(join(fs, "usr/lib/libc.so.6"), "\x7fELF");
    await ctr("k8s.io", "snapshots", "commit", "sha256:layer", "unpack-1");
    imageShadow = statSync(join(fs, "etc/shadow"), { bigint: true }).ino;
    // A container over it replaced /etc/shadow with a symlink to libc in its writable layer.
    const rw = await prepare("k8s.io", "container-rw", "sha256:layer");
    mkdirSync(join(snapshotsDir, rw, "fs/etc"), { recursive: true });
    symlinkSync("/usr/lib/libc.so.6", join(snapshotsDir, rw, "fs/etc/shadow"));
    // Another containerd namespace's container (the snapshotter's directories are shared).
    const other = await prepare("moby", "other-rw");
    mkdirSync(join(snapshotsDir, other, "fs/etc"), { recursive: true });
    writeFileSync(join(snapshotsDir, other, "fs/etc/shadow"), "planted\n");
  }, 60_000);
  afterAll(async () => {
    await cd?.stop();
  });

  it("every numbered directory holds the planted copies (what a search of all of them arms)", () => {
    const all = findInLayers(snapshotsDir, layerDirs(snapshotsDir), "/etc/shadow").map((f) => f.path);
    // The writable layer's symlink is followed only within that layer, which has no libc.
    expect(all.sort()).toEqual(["/etc/shadow", "/etc/shadow"]);
  });

  it("containerd names both writable layers, in every namespace", async () => {
    const { writable } = await containerdWritableDirs({ socket: cd.socket })();
    const dirs = readdirSync(snapshotsDir).filter((d) => /^[0-9]+$/.test(d));
    expect(writable.size).toBe(2);
    expect(dirs.filter((d) => !writable.has(d))).toHaveLength(1);
  });

  it("the agent's layer finder arms the image's file only, never the symlink's target nor a container's copy", async () => {
    const finder = agentFinder();
    try {
      // Once containerd has said which directories are writable (a finder without `ready` arms at once).
      await finder.ready;
      expect(finder.find("/etc/shadow").map((k) => k.ino)).toEqual([imageShadow]);
    } finally {
      finder.close();
    }
  });

  it("asks each snapshot's mounts once, and again for a key removed and prepared anew", async () => {
    const writable = containerdWritableDirs({ socket: cd.socket });
    const { writable: before } = await writable();
    await ctr("k8s.io", "snapshots", "rm", "container-rw");
    const again = await prepare("k8s.io", "container-rw", "sha256:layer");
    const { writable: after } = await writable();
    expect(before.has(again)).toBe(false);
    expect(after.has(again)).toBe(true);
    expect(after.size).toBe(2);
  });

  it("follows an image's symlink only into its own image: another image's link to the base's libc arms nothing", async () => {
    /** Unpacks one committed layer over `parent` with `fill`, as an image pull does. */
    const unpack = async (name: string, parent: string, fill: (fs: string) => void) => {
      const dir = await prepare("k8s.io", `unpack-${name}`, parent);
      fill(join(snapshotsDir, dir, "fs"));
      await ctr("k8s.io", "snapshots", "commit", `sha256:${name}`, `unpack-${name}`);
      return dir;
    };
    let tool = 0n;
    await unpack("app", "sha256:layer", (fs) => {
      mkdirSync(join(fs, "usr/bin"), { recursive: true });
      writeFileSync(join(fs, "usr/bin/tool"), "\x7fELF");
      tool = statSync(join(fs, "usr/bin/tool"), { bigint: true }).ino;
    });
    await unpack("evil", "sha256:layer", (fs) => {
      mkdirSync(join(fs, "etc"), { recursive: true });
      symlinkSync("/usr/lib/libc.so.6", join(fs, "etc/shadow"));
    });
    // A container of each image: its overlay names the image's chain.
    await prepare("k8s.io", "app-rw", "sha256:app");
    await prepare("k8s.io", "evil-rw", "sha256:evil");
    const finder = agentFinder();
    try {
      await finder.ready;
      expect(finder.find("/etc/shadow").map((k) => k.ino)).toEqual([imageShadow]);
      // The base's /bin → usr/bin, followed into the app image's own layer above it.
      expect(finder.find("/bin/tool").map((k) => k.ino)).toEqual([tool]);
    } finally {
      finder.close();
    }
  });
});
