/**
 * The node's image layers as discover uses them: a trap path's files found in the layers
 * (image-layers.ts) and proven by the kernel program, found again when the runtime unpacks or
 * removes an image (the snapshots directory changes). Each layer is walked for a path once: a
 * new image costs its own layers' walks, whatever the number of images on the node.
 */
import { type FSWatcher, watch } from "node:fs";
import { HiveError } from "../../api/errors.ts";
import type { LayerFinder } from "../controllers/discover.ts";
import type { FileKey } from "../kernel/contract.ts";
import { type PinnedProofMaps, proveFile, provenKey } from "../kernel/trap-proof.ts";
import type { Logger } from "../log.ts";
import { type LayerProve, LayerSteps, layerDirs, resolveInLayers } from "./image-layers.ts";
import { TrustedLayers, type WritableDirs } from "./writable-layers.ts";

/** After a change, the layers are looked at again this much later (a layer unpacked is committed then). */
const FOLLOW_UPS_MS = [2_000, 10_000];

export interface LayerFinderOptions {
  /** The snapshotter's `snapshots` directory as the agent sees it. */
  snapshotsDir: string;
  /** The kernel program's proof maps (none: stat's identities are armed unproven). */
  proofs?: Pick<PinnedProofMaps, "current">;
  log: Logger;
  /** Called (coalesced by the caller) when the layers may have changed. */
  onChange: () => void;
  /** Without change notifications, how often the layers are looked at again (default 30 s). */
  pollMs?: number;
  /**
   * Which snapshot directories are containers' writable layers (writable-layers.ts): those are
   * never searched. Without it every numbered directory is (a runtime whose API cannot say).
   */
  writable?: WritableDirs;
}

export interface NodeLayerFinder extends LayerFinder {
  /** Resolves once the first looks at which directories are image layers are done (never rejects). */
  ready: Promise<void>;
  close(): void;
}

function proverOf(proofs: Pick<PinnedProofMaps, "current">): LayerProve {
  return (fd, statKey, what) => {
    const maps = proofs.current();
    if (!maps)
      throw new HiveError(
        "TrapNotProven",
        "the kernel program is not loaded yet: layer files cannot be proven",
        {
          object: what,
          transient: true,
        },
      );
    return provenKey(statKey, proveFile(maps, fd), what);
  };
}

const SNAPSHOTTER_DIR = "/io.containerd.snapshotter.v1.overlayfs/snapshots";

/**
 * Says, when it changes, that the directory looked at is not containerd's snapshots directory
 * (nothing in it is armed) and which containerdRoot would be. Returns what was said.
 */
function sayWhereSnapshotsAre(
  trusted: TrustedLayers,
  snapshotsDir: string,
  said: string | undefined,
  log: Logger,
): string | undefined {
  const elsewhere = trusted.snapshotsElsewhere();
  const now = elsewhere?.join(", ");
  if (now === said) return said;
  if (elsewhere) {
    const roots = elsewhere.map((r) =>
      r.endsWith(SNAPSHOTTER_DIR) ? r.slice(0, -SNAPSHOTTER_DIR.length) : r,
    );
    log.error("containerd keeps its snapshots elsewhere: traps are not armed in the image layers", {
      snapshotsDir,
      containerdSnapshots: elsewhere,
      hint: `set the HiveMonitor's containerdRoot to ${roots.join(" or ")}; until then each trap is armed once its container runs`,
    });
  } else
    log.info("containerd's snapshots are in the image layers directory; traps are armed there", {
      snapshotsDir,
    });
  return now;
}

export function createLayerFinder(options: LayerFinderOptions): NodeLayerFinder {
  const { snapshotsDir, log } = options;
  const prove = options.proofs ? proverOf(options.proofs) : undefined;
  /** Per trap path: the layer list it was found in, and what was found. */
  const cache = new Map<string, { layers: string; files: FileKey[] }>();
  const trusted = options.writable ? new TrustedLayers(snapshotsDir, options.writable) : undefined;
  // Without containerd's word every numbered directory is searched, writable ones too: nothing is remembered.
  const steps = new LayerSteps(snapshotsDir, prove, trusted !== undefined);
  const above = (layer: string) => trusted?.above(layer) ?? [];
  let followUps: NodeJS.Timeout[] = [];
  let closed = false;
  let looking: Promise<void> | undefined;
  let again = false;
  let saidElsewhere: string | undefined;
  /** Looks at which directories are image layers again, then says the layers may have changed. */
  const look = async (notify = true): Promise<void> => {
    if (trusted)
      await trusted.refresh().catch((error: unknown) =>
        // With no layer here (a node of another runtime, or no image yet) nothing is at stake.
        log[layerDirs(snapshotsDir).length > 0 ? "warn" : "debug"](
          "cannot ask containerd which snapshots are writable; the layers trusted before are kept",
          { snapshotsDir, error, hint: "a layer unpacked meanwhile is armed once containerd answers" },
        ),
      );
    if (trusted) saidElsewhere = sayWhereSnapshotsAre(trusted, snapshotsDir, saidElsewhere, log);
    if (notify && !closed) options.onChange();
  };
  /** One look at a time; changes meanwhile make one more. */
  const lookAgain = (): void => {
    if (looking) {
      again = true;
      return;
    }
    looking = look().finally(() => {
      looking = undefined;
      if (again && !closed) {
        again = false;
        lookAgain();
      }
    });
  };
  const changed = () => {
    lookAgain();
    if (!trusted) return;
    for (const t of followUps) clearTimeout(t);
    followUps = FOLLOW_UPS_MS.map((ms) => setTimeout(lookAgain, ms).unref());
  };
  let watcher: FSWatcher | undefined;
  try {
    // A new layer directory is made when an image's layer is unpacked: find the trap files again.
    watcher = watch(snapshotsDir, { persistent: false }, changed);
    watcher.on("error", (error) =>
      log.warn("watching the image layers failed; they are polled", { snapshotsDir, error }),
    );
  } catch (error) {
    log.warn("cannot watch the image layers; they are polled", { snapshotsDir, error });
  }
  const poll = setInterval(lookAgain, options.pollMs ?? 30_000);
  poll.unref();
  // Two looks before any directory is trusted: one right after the other at the start.
  const ready = trusted ? look(false).then(() => look()) : Promise.resolve();
  return {
    ready,
    find(path) {
      const layers = trusted ? trusted.layers() : layerDirs(snapshotsDir);
      const signature = `${layers.join(",")};${trusted?.chainsSignature() ?? ""}`;
      const hit = cache.get(path);
      if (hit && hit.layers === signature) return hit.files;
      steps.keepOnly(layers);
      const files = resolveInLayers(steps, layers, path, above, (error) =>
        log.warn("an image's symlinks lead a trap path too far; that layer's other copies are armed", {
          error,
        }),
      ).map((f) => f.key);
      cache.set(path, { layers: signature, files });
      return files;
    },
    close() {
      closed = true;
      watcher?.close();
      clearInterval(poll);
      for (const t of followUps) clearTimeout(t);
    },
  };
}
