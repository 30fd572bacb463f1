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
 * is decided by its cgroup (runtime/controllers/cgroup-attribution.ts), never by the layer. So the
 * layer chain of each image need not be known. A symlink on the path is followed as the merged
 * view would: its target is looked up again in every layer.
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

/** Paths looked up for one trap path, symlink targets included. */
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

function fdPath(fd: number, name: string): string {
  return `/proc/self/fd/${fd}/${name}`;
}

/** Looks `parts` up in one layer: the file, where a symlink sends the path instead, or nothing. */
function walkLayer(layerFd: number, parts: readonly string[]): Step {
  let dirFd = layerFd;
  try {
    for (let i = 0; i < parts.length; i++) {
      const name = parts[i] as string;
      let fd: number;
      try {
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
 * Every copy of `path` in the layers `layers` (names under `snapshotsDir`), proven with `prove`.
 * When the symlinks on the path lead to more than MAX_LAYER_PATHS paths, the rest are not
 * followed and `onBound` is told (PathInvalid): any image can carry such a chain, and what the
 * path names in the other images (found first: the path itself before any symlink's target) must
 * stay armed.
 */
export function findInLayers(
  snapshotsDir: string,
  layers: readonly string[],
  path: string,
  prove?: LayerProve,
  onBound?: (error: HiveError) => void,
): LayerFile[] {
  const found = new Map<string, LayerFile>();
  const seen = new Set<string>();
  const queue = [posix.normalize(path)];
  const roots = new Map<string, number>();
  try {
    while (queue.length > 0) {
      const current = queue.shift() as string;
      if (seen.has(current)) continue;
      seen.add(current);
      if (seen.size > MAX_LAYER_PATHS) {
        onBound?.(
          new HiveError(
            "PathInvalid",
            `an image's symlinks lead ${path} to more than ${MAX_LAYER_PATHS} paths; the rest are not followed`,
            {
              object: path,
              bound: MAX_LAYER_PATHS,
              hint: "trap the file by the path its symlinks lead to",
            },
          ),
        );
        break;
      }
      const parts = current.split("/").filter((c) => c !== "" && c !== ".");
      if (parts.length === 0 || parts.length > MAX_COMPONENTS) continue;
      for (const layer of layers) {
        let root = roots.get(layer);
        if (root === undefined) {
          try {
            root = openSync(`${snapshotsDir}/${layer}/fs`, O_PATH | constants.O_DIRECTORY | O_NOFOLLOW);
          } catch {
            continue; // removed since it was listed
          }
          roots.set(layer, root);
        }
        const step = walkLayer(root, parts);
        if ("redirect" in step) queue.push(step.redirect);
        else if ("file" in step) {
          try {
            const key = prove
              ? prove(step.file.fd, step.file.key, `${current} in image layer ${layer}`)
              : step.file.key;
            found.set(`${key.major}:${key.minor}:${key.ino}`, { key, layer, path: current });
          } finally {
            closeSync(step.file.fd);
          }
        }
      }
    }
  } finally {
    for (const fd of roots.values()) closeSync(fd);
  }
  return [...found.values()];
}
