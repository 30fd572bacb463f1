/**
 * The standalone half of the image-layer case (layer-cases.ts): `hive watch`'s in-process core
 * (startStandalone, composed as the CLI composes it: the containerd lister, its event stream, the
 * layer finder over the overlayfs snapshots and cgroup attribution) on the guest's own program,
 * watching the same containers as the agent. Its trap selects containers by their containerd labels.
 */

import type { Alert } from "../../../api/alert.ts";
import { createAlertPipeline } from "../../../runtime/alerts/pipeline.ts";
import { containerdWritableDirs } from "../../../runtime/discover/writable-layers.ts";
import { createHiveMetrics } from "../../../runtime/metrics/metrics.ts";
import { openContainerLister } from "../../../runtime/standalone/local-containers.ts";
import { parsePolicyText } from "../../../runtime/standalone/policy-files.ts";
import { type Standalone, startStandalone } from "../../../runtime/standalone/standalone.ts";
import { openStandaloneLayers } from "../../../runtime/standalone/standalone-layers.ts";
import { captureLogger } from "../../alerts/fixtures.ts";
import type { ImageContainerd } from "../../fixtures/image-containers.ts";
import { LAYER_POLICY } from "../../fixtures/layer-policy.ts";
import type { GuestHarness } from "./process-cases.ts";

export interface StandaloneOnLayers {
  standalone: Standalone;
  alerts: Alert[];
  dropped: Record<string, number>;
  /** The alerts that name container `id`. */
  of(id: string): Alert[];
  /** Whether the image layer's file is in the kernel map. */
  layerArmed(): boolean;
  /** Whether container `id`'s own file (its overlay inode) is armed. */
  containerArmed(id: string): boolean;
  log: ReturnType<typeof captureLogger>;
  close(): Promise<void>;
}

export async function startStandaloneOnLayers(
  h: GuestHarness,
  cd: ImageContainerd,
  snapshotsDir: string,
): Promise<StandaloneOnLayers> {
  const lister = await openContainerLister({ socket: cd.sock });
  if (!lister) throw new Error("the private containerd's socket is missing");
  const log = captureLogger();
  const alerts: Alert[] = [];
  const dropped: Record<string, number> = {};
  const pipeline = await createAlertPipeline({
    logger: log.logger,
    metrics: createHiveMetrics({ processMetrics: false }),
    lines: (line) => alerts.push(JSON.parse(line) as Alert),
    rateLimit: false,
  });
  const watcher = h.watcher();
  const layers = openStandaloneLayers({
    snapshotsDir,
    cgroupRoot: "/sys/fs/cgroup",
    records: () => lister.records(),
    writable: containerdWritableDirs({ socket: cd.sock }),
    watcher,
    logger: log.logger,
    explicit: true,
  });
  if (!layers) throw new Error(`no image layers for hive watch: ${JSON.stringify(log.lines)}`);
  await layers.ready;
  const { documents, problems } = parsePolicyText("layers.yaml", LAYER_POLICY);
  if (problems.length > 0) throw new Error(JSON.stringify(problems));
  const standalone = await startStandalone({
    documents,
    watcher,
    alerts: pipeline,
    logger: log.logger,
    kernelId: "guest",
    listContainers: () => lister.list(),
    containerEvents: lister.events(),
    imageLayers: layers,
    onEventDropped: (reason) => {
      dropped[reason] = (dropped[reason] ?? 0) + 1;
    },
  });
  layers.onChange(() => void standalone.layersChanged());
  return {
    standalone,
    alerts,
    dropped,
    of: (id) => alerts.filter((a) => a.pod?.container.id === id),
    layerArmed: () => [...standalone.table.slots.values()].some((s) => s.kind === "layer"),
    containerArmed: (id) =>
      standalone.plan.files.some((f) => f.target.kind === "container" && f.target.container.id === id),
    log,
    async close() {
      await standalone.close();
      layers.close();
      lister.close();
      await pipeline.close();
    },
  };
}
