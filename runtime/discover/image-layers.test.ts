import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { fileKeyFromStat } from "../kernel/layout.ts";
import { findInLayers, LayerSteps, layerDirs, MAX_LAYER_PATHS, resolveInLayers } from "./image-layers.ts";

let snapshots: string;
const layer = (id: string) => {
  const fs = join(snapshots, id, "fs");
  mkdirSync(fs, { recursive: true });
  return fs;
};
const put = (id: string, path: string, content = "x") => {
  const file = join(layer(id), path);
  mkdirSync(join(file, ".."), { recursive: true });
  writeFileSync(file, content);
  return fileKeyFromStat(statSync(file));
};
const link = (id: string, path: string, target: string) => {
  const at = join(layer(id), path);
  mkdirSync(join(at, ".."), { recursive: true });
  symlinkSync(target, at);
};
const find = (path: string) => findInLayers(snapshots, layerDirs(snapshots), path);
const keys = (files: { key: { ino: bigint } }[]) => files.map((f) => f.key.ino).sort();

beforeEach(() => {
  snapshots = mkdtempSync(join(tmpdir(), "hive-layers-"));
});
afterEach(() => rmSync(snapshots, { recursive: true, force: true }));

describe("image layers", () => {
  it("lists the snapshotter's layer directories by number, ignoring anything else", () => {
    layer("10");
    layer("2");
    mkdirSync(join(snapshots, "metadata"), { recursive: true });
    expect(layerDirs(snapshots)).toEqual(["2", "10"]);
    expect(layerDirs(join(snapshots, "absent"))).toEqual([]);
  });

  it("finds every layer's copy of the path, and no whiteout, directory or device", () => {
    const a = put("1", "etc/secret");
    const b = put("3", "etc/secret");
    // A whiteout (as the overlayfs snapshotter unpacks one): a 0/0 character device.
    layer("2");
    mkdirSync(join(layer("2"), "etc"));
    execFileSync("mknod", [join(layer("2"), "etc/secret"), "c", "0", "0"]);
    mkdirSync(join(layer("4"), "etc/secret"), { recursive: true });
    expect(keys(find("/etc/secret"))).toEqual([a.ino, b.ino].sort());
    expect(
      find("/etc/secret")
        .map((f) => f.layer)
        .sort(),
    ).toEqual(["1", "3"]);
  });

  it("follows a layer's symlink within that layer", () => {
    const real = put("1", "usr/share/secret");
    link("1", "etc", "usr/share"); // relative, as merged /usr's /bin → usr/bin
    link("1", "run/secret", "/etc/secret"); // absolute: the image's root
    const found = find("/run/secret");
    expect(keys(found)).toEqual([real.ino]);
    expect(found[0]?.path).toBe("/usr/share/secret");
  });

  it("follows a symlink into the layers above it in an image's chain, never below", () => {
    // A distribution's base layer shared by every image: its own shadow and libc.
    const shadow = put("1", "etc/shadow");
    put("1", "usr/lib/libc.so.6");
    link("1", "bin", "usr/bin");
    // An image's upper layer installed a tool where the base's /bin leads.
    const tool = put("2", "usr/bin/tool");
    // An attacker's image over the same base links the trapped path to the base's libc.
    link("3", "etc/shadow", "/usr/lib/libc.so.6");
    const chains: Record<string, string[]> = { "1": ["2", "3"] };
    const above = (layer: string) => chains[layer] ?? [];
    const layers = layerDirs(snapshots);
    const shadows = findInLayers(snapshots, layers, "/etc/shadow", undefined, undefined, above);
    expect(keys(shadows)).toEqual([shadow.ino]);
    expect(keys(findInLayers(snapshots, layers, "/bin/tool", undefined, undefined, above))).toEqual([
      tool.ino,
    ]);
    // Which image an upper layer belongs to is known only from a chain seen: without it, not followed.
    expect(find("/bin/tool")).toEqual([]);
    // The attacker's own copy, in its own layer, is its own image's file.
    const own = put("3", "usr/lib/libc.so.6");
    expect(keys(findInLayers(snapshots, layers, "/etc/shadow", undefined, undefined, above))).toEqual(
      [shadow.ino, own.ino].sort(),
    );
  });

  it("walks each layer once per path: a new image costs its own layers only", () => {
    for (let i = 1; i <= 20; i++) put(String(i), "etc/shadow");
    const steps = new LayerSteps(snapshots);
    expect(resolveInLayers(steps, layerDirs(snapshots), "/etc/shadow")).toHaveLength(20);
    const first = { ...steps.counts };
    expect(first.walks).toBe(20);
    put("21", "etc/shadow");
    put("22", "etc/other");
    expect(resolveInLayers(steps, layerDirs(snapshots), "/etc/shadow")).toHaveLength(21);
    expect(steps.counts.walks - first.walks).toBe(2);
    // A layer removed with its image is forgotten.
    rmSync(join(snapshots, "21"), { recursive: true });
    steps.keepOnly(layerDirs(snapshots));
    expect(resolveInLayers(steps, layerDirs(snapshots), "/etc/shadow")).toHaveLength(20);
  });

  it("never leaves the layers: an absolute or climbing symlink names the image's root, not the host's", () => {
    const host = join(snapshots, "host-secret");
    writeFileSync(host, "host");
    link("1", "etc/secret", host); // the host path, planted in a layer
    link("1", "etc/up", "../../../../../../../../host-secret");
    expect(find("/etc/secret")).toEqual([]);
    expect(find("/etc/up")).toEqual([]);
    // A directory of the path replaced by a symlink to the host's directory is not followed either.
    link("2", "srv", snapshots);
    expect(find("/srv/host-secret")).toEqual([]);
  });

  it("bounds symlink chains and loops, and one image's chain disarms no other image's file", () => {
    // One image's layer has the file; an attacker's image makes the same path a chain of symlinks.
    const real = put("1", "etc/shadow");
    link("3", "etc/shadow", "/l0");
    for (let i = 0; i < MAX_LAYER_PATHS + 2; i++) link("3", `l${i}`, `/l${i + 1}`);
    const bounds: string[] = [];
    const found = findInLayers(snapshots, layerDirs(snapshots), "/etc/shadow", undefined, (e) =>
      bounds.push(e.message),
    );
    expect(keys(found)).toEqual([real.ino]);
    expect(bounds).toEqual([expect.stringMatching(/more than 16 paths/)]);
    link("2", "a", "/b");
    link("2", "b", "/a");
    expect(find("/a")).toEqual([]);
  });

  it("arms the identity the prover names", () => {
    put("1", "etc/secret");
    const proven = { major: 7, minor: 7, ino: 42n };
    const found = findInLayers(snapshots, ["1"], "/etc/secret", () => proven);
    expect(found.map((f) => f.key)).toEqual([proven]);
  });
});
