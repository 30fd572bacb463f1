/**
 * `hive watch` on image layers, with a stand-in kernel: an access to the layer's file is told to
 * its container by cgroup (a real cgroup-like directory tree, its ids the directories' inodes), and
 * a container no trap selects is quieted in the kernel only until what selects it may have changed.
 */
import { mkdirSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { AlertSource } from "../../runtime/alerts/alert-source.ts";
import { createContainerAttribution } from "../../runtime/standalone/container-cgroups.ts";
import { parsePolicyText } from "../../runtime/standalone/policy-files.ts";
import { startStandalone } from "../../runtime/standalone/standalone.ts";
import type { ContainerRecord } from "../../runtime/standalone/watch-plan.ts";
import { captureLogger, makeEvent } from "../alerts/fixtures.ts";
import { LAYER_POLICY } from "../fixtures/layer-policy.ts";
import { standInWatcher } from "./stand-in-watcher.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe("hive watch on image layers", () => {
  it("quiets a container no trap selects, and forgets it when containerd says the container changed", async () => {
    const cgroups = mkdtempSync(join(tmpdir(), "hive-watch-cgroups-"));
    cleanups.push(() => rmSync(cgroups, { recursive: true, force: true }));
    mkdirSync(join(cgroups, "default/web"), { recursive: true });
    const cgroupId = statSync(join(cgroups, "default/web"), { bigint: true }).ino;
    let labels: Record<string, string> = { app: "other" };
    const records = async (): Promise<ContainerRecord[]> => [
      { id: "web", name: "web", runtimeNamespace: "default", labels, cgroupsPath: "/default/web" },
    ];
    const kernel = standInWatcher();
    const alerted: AlertSource[] = [];
    const documents = parsePolicyText("layers.yaml", LAYER_POLICY).documents;
    const layerKey = { major: 254, minor: 1, ino: 77n };
    const standalone = await startStandalone({
      documents,
      watcher: kernel.watcher,
      alerts: { handle: (_event, source) => void alerted.push(source) },
      logger: captureLogger().logger,
      kernelId: "k",
      listContainers: async () => [],
      imageLayers: {
        layers: { find: (path) => (path === "/etc/secret" ? [layerKey] : []) },
        attribution: createContainerAttribution({ cgroupRoot: cgroups, records }),
      },
    });
    cleanups.push(() => standalone.close());
    const slot = [...standalone.table.slots].find(([, info]) => info.kind === "layer")?.[0];
    expect(slot).toBeDefined();
    const read = () =>
      kernel.emit(makeEvent(1, { key: layerKey, slot: slot ?? 0, cgroupId, accesses: ["read"] }));

    read();
    await new Promise((r) => setTimeout(r, 50));
    expect(alerted).toEqual([]);
    expect(kernel.quieted()).toEqual([`${cgroupId}/${slot}`]);
    // A re-plan for a changed file does not change what selects a container: it stays quiet.
    await standalone.layersChanged();
    expect(kernel.quieted()).toHaveLength(1);

    // Relabelled (containerd's /containers/update): quiet no more, and its next read alerts.
    labels = { app: "reader" };
    await standalone.containersChanged({ reason: "/containers/update" });
    expect(kernel.quieted()).toEqual([]);
    read();
    await new Promise((r) => setTimeout(r, 50));
    expect(alerted.map((s) => s.annotations.container_id)).toEqual(["web"]);
  });
});
