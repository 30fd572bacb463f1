/**
 * A node whose containerd keeps its root elsewhere than the agent mounts it from: k3s's layout
 * with the default `containerdRoot`. The DaemonSet makes the mounted directory, empty, where it is
 * missing (so the agent's pod starts and a rollout does not stall), and the agent must then
 * neither arm anything from that directory nor stay silent: it asks containerd where its writable
 * snapshots are and names the root to set. A real containerd in k3s's layout, with an image layer
 * committed and a container's writable snapshot over it.
 */
import { execFile } from "node:child_process";
import { cpSync, mkdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { layerDirs } from "../../runtime/discover/image-layers.ts";
import { createLayerFinder } from "../../runtime/discover/layer-finder.ts";
import { containerdWritableDirs } from "../../runtime/discover/writable-layers.ts";
import { createLogger } from "../../runtime/log.ts";
import { type Containerd, containerSuiteGate, startContainerd } from "./containerd-harness.ts";

const run = promisify(execFile);
const runs = containerSuiteGate();
const K3S_ROOT = "var/lib/rancher/k3s/agent/containerd";
const SNAPSHOTS = "io.containerd.snapshotter.v1.overlayfs/snapshots";

describe.runIf(runs)("image layers mounted from a directory that is not containerd's", () => {
  let cd: Containerd;
  let snapshotsDir: string;
  let imageShadow: bigint;
  let imageLayer: string;
  const ctr = (...args: string[]) =>
    run("/usr/bin/ctr", ["--address", cd.socket, "--namespace", "k8s.io", ...args]);

  /** The agent's layer finder over `dir`, asking this containerd; its log lines. */
  const finderOver = async (dir: string) => {
    const lines: Record<string, unknown>[] = [];
    const finder = createLayerFinder({
      snapshotsDir: dir,
      log: createLogger({}, { level: "info", sink: (line) => lines.push(JSON.parse(line)) }),
      onChange: () => undefined,
      writable: containerdWritableDirs({ socket: cd.socket }),
    });
    try {
      await finder.ready;
      return {
        found: finder.find("/etc/shadow").map((k) => k.ino),
        errors: lines.filter((l) => l.level === "error"),
      };
    } finally {
      finder.close();
    }
  };

  beforeAll(async () => {
    cd = await startContainerd({ namespace: "k8s.io", root: K3S_ROOT });
    snapshotsDir = join(cd.dir, K3S_ROOT, SNAPSHOTS);
    await ctr("snapshots", "prepare", "unpack-1");
    [imageLayer] = layerDirs(snapshotsDir) as [string];
    const fs = join(snapshotsDir, imageLayer, "fs");
    mkdirSync(join(fs, "etc"), { recursive: true });
    writeFileSync(join(fs, "etc/shadow"), "root:*:19000:0:99999:7:::\n");
    await ctr("snapshots", "commit", "sha256:layer", "unpack-1");
    imageShadow = statSync(join(fs, "etc/shadow"), { bigint: true }).ino;
    await ctr("snapshots", "prepare", "container-rw", "sha256:layer"); // a running container's
  }, 60_000);
  afterAll(async () => {
    await cd?.stop();
  });

  it("arms nothing from the empty directory made in its place, and names containerd's root", async () => {
    const made = join(cd.dir, "var/lib/containerd", SNAPSHOTS);
    mkdirSync(made, { recursive: true });
    const { found, errors } = await finderOver(made);
    expect(found).toEqual([]);
    expect(errors).toMatchObject([
      {
        msg: "containerd keeps its snapshots elsewhere: traps are not armed in the image layers",
        snapshotsDir: made,
        containerdSnapshots: [snapshotsDir],
        hint: expect.stringContaining(`set the HiveMonitor's containerdRoot to ${join(cd.dir, K3S_ROOT)};`),
      },
    ]);
  });

  it("trusts no layer of a stale directory that another containerd left there", async () => {
    const stale = join(cd.dir, "stale", SNAPSHOTS);
    cpSync(join(snapshotsDir, imageLayer), join(stale, "901"), { recursive: true });
    const { found, errors } = await finderOver(stale);
    expect(found).toEqual([]);
    expect(errors).toHaveLength(1);
  });

  it("arms the image's file from containerd's own directory, and says nothing", async () => {
    const { found, errors } = await finderOver(snapshotsDir);
    expect(found).toEqual([imageShadow]);
    expect(errors).toEqual([]);
  });
});
