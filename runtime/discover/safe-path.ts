/**
 * Resolves a trap path inside a container's root without ever leaving it. The agent runs
 * as root on the host, so a container that plants `/etc/shadow -> /etc/shadow` (absolute,
 * meaning the HOST file to a naive resolver) or `../../..` must not make it stat, create or
 * chmod a host file.
 *
 * Node has no openat(2), so each step opens `/proc/self/fd/<dirfd>/<name>`: the kernel
 * jumps to the directory the fd holds (a magic link, not a path re-walk) and looks up ONE
 * name in it. Every component is opened with O_PATH|O_NOFOLLOW and then fstat'ed: what we
 * decide on is the object the fd holds, so a rename race can make the walk fail, never
 * escape. Symlinks are read and their targets walked by this code, with chroot semantics:
 * absolute targets restart at the container root, `..` never climbs above it. The same
 * rules as openat2(RESOLVE_IN_ROOT), which Node cannot call. The walk's state and its steps
 * are in root-walk.ts; this file holds the entry points, their bounds and what they answer.
 */
import { type BigIntStats, closeSync, constants, openSync, statSync } from "node:fs";
import { HiveError } from "../../api/errors.ts";
import type { FileKey } from "../kernel/contract.ts";
import { fileKeyFromStat } from "../kernel/layout.ts";
import type { ProveHook } from "../kernel/trap-proof.ts";
import {
  checkBudget,
  closeWalk,
  entryPath,
  type FoundEntry,
  fstat,
  O_PATH,
  startWalk,
  step,
  type Walk,
} from "./root-walk.ts";

/** Linux's own limit on symlinks followed in one lookup (MAXSYMLINKS). */
export const MAX_SYMLINKS = 40;
/** Lookups one resolution may make in total, symlink targets and `..` included (PATH_MAX is 4,096 bytes). */
export const MAX_PATH_COMPONENTS = 4096;

export interface ResolveOptions {
  /** Create an empty regular file when the final component does not exist. */
  create?: boolean;
  /** Permission bits for a created file (default 0o444); applied with fchmod, so umask does not interfere. */
  mode?: number;
  /** Symlinks followed at most (default MAX_SYMLINKS, 40). */
  maxSymlinks?: number;
  /** Path components looked up at most, symlink targets and `..` included (default MAX_PATH_COMPONENTS, 4,096). */
  maxComponents?: number;
}

export interface ResolvedFile {
  /** The file as the kernel identifies it (proven by the kernel when resolved with a ProveHook). */
  key: FileKey;
  /** The directory holding the final entry: watching it reveals renames over and re-creations of the file. */
  parent: FileKey;
  /** What the kernel checked after `key` (an overlay's file unchanged from its image: the layer's file). */
  lower?: FileKey;
  /** The path inside the container after following symlinks (always absolute, never above `/`). */
  resolvedPath: string;
  created: boolean;
  fileType: "file" | "directory" | "other";
  /** Symlinks followed, as `link -> target`, for messages that explain a surprise. */
  symlinks: string[];
}

function kindOf(stat: BigIntStats): ResolvedFile["fileType"] {
  if (stat.isFile()) return "file";
  if (stat.isDirectory()) return "directory";
  return "other";
}

/**
 * Resolves `path` under `rootPath` (normally `/proc/<pid>/root`). Throws HiveError with
 * FileNotFound, PathInvalid, PathEscapesContainer (a symlink chain pointed outside the root
 * and the file does not exist inside it) or ContainerNotFound.
 */
export function resolveInRoot(
  rootPath: string,
  path: string,
  options: ResolveOptions = {},
  prove?: ProveHook,
): ResolvedFile {
  assertAbsolute(path);
  let rootFd: number;
  try {
    // Following the /proc/<pid>/root magic link is the one deliberate follow: it IS the container root.
    rootFd = openSync(rootPath, O_PATH | constants.O_DIRECTORY);
  } catch (error) {
    throw new HiveError("ContainerNotFound", "container root is not reachable", {
      object: rootPath,
      hint: "the container may have exited; it is retried when it runs again",
      cause: error,
    });
  }
  try {
    const rootStat = fstat(rootFd);
    const found = resolveInRootFd(rootFd, path, options, prove);
    // The container may have been replaced while we walked: the root must be the one we started in.
    const rootNow = statSync(rootPath, { bigint: true });
    if (rootNow.dev !== rootStat.dev || rootNow.ino !== rootStat.ino) {
      throw new HiveError("ContainerNotFound", "container root changed during resolution", {
        object: rootPath,
        hint: "the container restarted; it is resolved again",
      });
    }
    return found;
  } finally {
    closeSync(rootFd);
  }
}

function assertAbsolute(path: string): void {
  if (!path.startsWith("/")) {
    throw new HiveError("PathInvalid", "trap path must be absolute", {
      object: path,
      hint: 'start the path with "/"',
    });
  }
}

/**
 * Resolves `path` under the directory `rootFd` holds (O_PATH; see container-process.ts for how
 * a container's root is reached without trusting its PID). The caller keeps and closes `rootFd`.
 * Throws as resolveInRoot does, and PathInvalid when the walk exceeds its bounds.
 *
 * Bounded whatever the container plants: at most `maxComponents` lookups (symlink targets and
 * `..` included) and `maxSymlinks` symlinks, and at most two descriptors of its own open at once
 * (the current directory and the entry being looked up) beside `rootFd`. The directories walked
 * are remembered by identity (device, inode), not held: `..` reopens the parent through the
 * current directory and must land on the directory we came from, or the walk fails.
 */
export function resolveInRootFd(
  rootFd: number,
  path: string,
  options: ResolveOptions = {},
  prove?: ProveHook,
): ResolvedFile {
  const limits = {
    maxSymlinks: options.maxSymlinks ?? MAX_SYMLINKS,
    maxComponents: options.maxComponents ?? MAX_PATH_COMPONENTS,
    create: options.create ?? false,
    mode: options.mode ?? 0o444,
  };
  assertAbsolute(path);
  const walk = startWalk(rootFd, path, limits);
  try {
    checkBudget(walk);
    let found: FoundEntry | undefined;
    while (found === undefined && walk.pending.length > 0) found = step(walk);
    if (found === undefined) {
      throw new HiveError("PathInvalid", "trap path names the container root, not a file", { object: path });
    }
    walk.child = found.fd; // closed below
    return answer(walk, found, prove);
  } finally {
    closeWalk(walk);
  }
}

/** The resolved file, its identities named by the kernel when a ProveHook is given. */
function answer(walk: Walk, found: FoundEntry, prove: ProveHook | undefined): ResolvedFile {
  const resolvedPath = entryPath(walk, found.name);
  const stated = { key: fileKeyFromStat(found.stat), parent: fileKeyFromStat(fstat(walk.dirFd)) };
  // While both descriptors are held: the kernel names the identities to arm (trap-proof.ts).
  const armed = prove ? prove({ fileFd: found.fd, dirFd: walk.dirFd, resolvedPath, ...stated }) : stated;
  return {
    ...armed,
    resolvedPath,
    created: found.created,
    fileType: kindOf(found.stat),
    symlinks: walk.symlinks,
  };
}
