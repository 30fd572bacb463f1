/**
 * A trap path's file in the image layers on this node, found before any container of the image
 * runs. containerd's overlayfs snapshotter keeps each layer as a directory
 * (`<snapshots>/<id>/fs`); a container's root is an overlay over them, and every permission check
 * of an unchanged image file reaches the layer's own inode too (the overlay checks its real inode).
 * Armed on that inode, a trap holds from the container's first instruction.
 *
 * Every copy of the path in every layer is returned (a superset of what any one image shows): a
 * copy hidden by an upper layer's whiteout, opaque directory or newer copy is never reached at
 * that path, so arming it costs a map entry and never fires; which container an access comes from
 * is decided by its cgroup (runtime/controllers/cgroup-attribution.ts), never by the layer.
 *
 * A symlink is different: what it names depends on the image it is in. Its target is looked up
 * only in its own layer and in the layers known to lie above it in some image's chain (`above`:
 * read from containers' overlay mounts, writable-layers.ts). A layer above another exists only in
 * images that contain the lower one (containerd keys a snapshot by its whole chain), so the copy
 * found there belongs to an image where the symlink is on the path. Never below: a layer shared
 * by many images (a distribution's base) would otherwise be armed as the trapped file of every
 * one of them because one image, maybe an attacker's, links the trapped path to it.
 *
 * Committed layers never change, so each (layer, path) is walked once and remembered
 * (`LayerSteps`): a new image costs a walk of its own layers, not of every layer on the node.
 *
 * The snapshot directories also hold containers' writable layers, whose contents containers
 * control: the agent searches only those containerd shows are not (writable-layers.ts), and each
 * walk opens one name at a time with O_PATH|O_NOFOLLOW under the layer's descriptor
 * (as safe-path.ts does), never follows a symlink on the host, and is bounded.
 */
import { closeSync, constants, fstatSync, openSync, readdirSync, readlinkSync } from "node:fs";
import { posix } from "node:path";
import { HiveError } from "../../api/errors.ts";
import type { FileKey } from "../kernel/contract.ts";
import { fileKeyFromStat } from "../kernel/layout.ts";

const O_PATH = 0o10000000;
const O_NOFOLLOW = constants.O_NOFOLLOW;

/** Paths looked up from one layer for one trap path, symlink targets included. */
export const MAX_LAYER_PATHS = 16;
/** Components of one path. */
const MAX_COMPONENTS = 256;

/** One copy of the trapped file in a layer. */
export interface LayerFile {
  key: FileKey;
  /** The layer directory's name under the snapshots directory. */
  layer: string;
  /** The path inside the image after the symlinks followed. */
  path: string;
}

/** Turns stat()'s identity of a layer file (held by `fd`) into the one the kernel checks. */
export type LayerProve = (fd: number, statKey: FileKey, what: string) => FileKey;

/** The layer directories under `snapshotsDir` (`<id>/fs`), by name; none when it does not exist. */
export function layerDirs(snapshotsDir: string): string[] {
  let names: string[];
  try {
    names = readdirSync(snapshotsDir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw new HiveError("RuntimeUnavailable", "cannot list the container runtime's image layers", {
      object: snapshotsDir,
      cause: error,
      hint: "mount the snapshotter's directory into the agent (HiveMonitor's containerdRoot)",
      transient: true,
    });
  }
  return names.filter((n) => /^[0-9]+$/.test(n)).sort((a, b) => Number(a) - Number(b));
}

type Step = { file: { fd: number; key: FileKey } } | { redirect: string } | { absent: true };

/** What one path is in one layer, once proven: the file's identity, a symlink's target, or nothing. */
type Found = { key: FileKey } | { redirect: string } | { absent: true };

/** The work the layer walks did: walks of a path in a layer, and names opened. */
export interface LayerWalkCounts {
  walks: number;
  opens: number;
}

function fdPath(fd: number, name: string): string {
  return `/proc/self/fd/${fd}/${name}`;
}

/** Looks `parts` up in one layer: the file, where a symlink sends the path instead, or nothing. */
function walkLayer(layerFd: number, parts: readonly string[], counts: LayerWalkCounts): Step {
  let dirFd = layerFd;
  counts.walks++;
  try {
    for (let i = 0; i < parts.length; i++) {
      const name = parts[i] as string;
      let fd: number;
      try {
        counts.opens++;
        fd = openSync(fdPath(dirFd, name), O_PATH | O_NOFOLLOW);
      } catch {
        return { absent: true }; // not in this layer (ENOENT, ENOTDIR, EACCES: nothing to arm here)
      }
      const stat = fstatSync(fd, { bigint: true });
      if (stat.isSymbolicLink()) {
        const target = readlinkSync(fdPath(dirFd, name), "utf8");
        closeSync(fd);
        const here = `/${parts.slice(0, i).join("/")}`;
        const rest = parts.slice(i + 1).join("/");
        // Absolute targets mean the image's root; `..` never climbs above it (normalize clamps).
        const next = target.startsWith("/") ? `${target}/${rest}` : `${here}/${target}/${rest}`;
        return { redirect: posix.normalize(next).replace(/\/+$/, "") || "/" };
      }
      const last = i === parts.length - 1;
      if (last) {
        if (!stat.isFile()) {
          closeSync(fd);
          return { absent: true }; // a whiteout (0/0 character device), a directory, a device
        }
        return { file: { fd, key: fileKeyFromStat(stat) } };
      }
      if (!stat.isDirectory()) {
        closeSync(fd);
        return { absent: true };
      }
      if (dirFd !== layerFd) closeSync(dirFd);
      dirFd = fd;
    }
    return { absent: true };
  } finally {
    if (dirFd !== layerFd) closeSync(dirFd);
  }
}

/**
 * What each path is in each layer, walked once: committed layers never change. The cache follows
 * the layers listed (`keepOnly`); a proof that fails (the program not loaded yet) is not kept.
 */
export class LayerSteps {
  readonly counts: LayerWalkCounts = { walks: 0, opens: 0 };
  private readonly snapshotsDir: string;
  private readonly prove: LayerProve | undefined;
  private readonly remember: boolean;
  private readonly steps = new Map<string, Map<string, Found>>();

  /** `remember`: false where the directories searched may be writable (nothing is cached then). */
  constructor(snapshotsDir: string, prove?: LayerProve, remember = true) {
    this.snapshotsDir = snapshotsDir;
    this.prove = prove;
    this.remember = remember;
  }

  /** Forgets the layers not in `layers` (removed with their image). */
  keepOnly(layers: readonly string[]): void {
    const keep = new Set(layers);
    for (const layer of this.steps.keys()) if (!keep.has(layer)) this.steps.delete(layer);
  }

  /** What `path` (normalized, absolute) is in `layer`. */
  step(layer: string, path: string): Found {
    const known = this.steps.get(layer)?.get(path);
    if (known) return known;
    const found = this.walk(layer, path);
    if (this.remember && found) {
      const byPath = this.steps.get(layer) ?? new Map<string, Found>();
      this.steps.set(layer, byPath);
      byPath.set(path, found);
    }
    return found ?? { absent: true };
  }

  /** One walk; undefined when the layer is gone (not remembered: it may be listed again). */
  private walk(layer: string, path: string): Found | undefined {
    const parts = path.split("/").filter((c) => c !== "" && c !== ".");
    if (parts.length === 0 || parts.length > MAX_COMPONENTS) return { absent: true };
    let root: number;
    try {
      root = openSync(`${this.snapshotsDir}/${layer}/fs`, O_PATH | constants.O_DIRECTORY | O_NOFOLLOW);
    } catch {
      return undefined; // removed since it was listed
    }
    try {
      const step = walkLayer(root, parts, this.counts);
      if (!("file" in step)) return step;
      try {
        const what = `${path} in image layer ${layer}`;
        return { key: this.prove ? this.prove(step.file.fd, step.file.key, what) : step.file.key };
      } finally {
        closeSync(step.file.fd);
      }
    } finally {
      closeSync(root);
    }
  }
}

/** Which layers lie above a layer in some image's chain (none known: its symlinks stay in it). */
export type LayersAbove = (layer: string) => readonly string[];

/**
 * Every copy of `path` in the layers `layers`, each layer's symlinks followed in that layer and
 * the layers `above` it. When one layer's symlinks lead to more than MAX_LAYER_PATHS paths, the
 * rest are not followed and `onBound` is told (PathInvalid): any image can carry such a chain, and
 * it must cost only that image's own copies.
 */
export function resolveInLayers(
  steps: LayerSteps,
  layers: readonly string[],
  path: string,
  above: LayersAbove = () => [],
  onBound?: (error: HiveError) => void,
): LayerFile[] {
  const found = new Map<string, LayerFile>();
  const start = posix.normalize(path);
  for (const layer of layers) {
    const queue: [string, string][] = [[layer, start]];
    const paths = new Set<string>();
    const seen = new Set<string>();
    while (queue.length > 0) {
      const [where, current] = queue.shift() as [string, string];
      if (seen.has(`${where}\0${current}`)) continue;
      seen.add(`${where}\0${current}`);
      paths.add(current);
      if (paths.size > MAX_LAYER_PATHS) {
        onBound?.(tooManyPaths(path, layer));
        break;
      }
      const step = steps.step(where, current);
      if ("redirect" in step) for (const next of [where, ...above(where)]) queue.push([next, step.redirect]);
      else if ("key" in step) {
        const { key } = step;
        found.set(`${key.major}:${key.minor}:${key.ino}`, { key, layer: where, path: current });
      }
    }
  }
  return [...found.values()];
}

function tooManyPaths(path: string, layer: string): HiveError {
  return new HiveError(
    "PathInvalid",
    `image layer ${layer}'s symlinks lead ${path} to more than ${MAX_LAYER_PATHS} paths; the rest are not followed`,
    { object: path, layer, bound: MAX_LAYER_PATHS, hint: "trap the file by the path its symlinks lead to" },
  );
}

/** Every copy of `path` in `layers` (names under `snapshotsDir`), walked afresh: see resolveInLayers. */
export function findInLayers(
  snapshotsDir: string,
  layers: readonly string[],
  path: string,
  prove?: LayerProve,
  onBound?: (error: HiveError) => void,
  above?: LayersAbove,
): LayerFile[] {
  return resolveInLayers(new LayerSteps(snapshotsDir, prove, false), layers, path, above, onBound);
}
