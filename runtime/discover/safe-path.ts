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
 * rules as openat2(RESOLVE_IN_ROOT), which Node cannot call.
 */
import {
  type BigIntStats,
  closeSync,
  constants,
  fchmodSync,
  fstatSync,
  mkdirSync,
  openSync,
  readlinkSync,
  statSync,
} from "node:fs";
import { HiveError } from "../../api/errors.ts";
import type { FileKey } from "../kernel/contract.ts";
import { fileKeyFromStat } from "../kernel/layout.ts";
import type { ProveHook } from "../kernel/trap-proof.ts";

/** O_PATH is not in Node's constants; the value is the same on x86-64 and arm64 (asm-generic). */
const O_PATH = 0o10000000;
const { O_NOFOLLOW, O_CREAT, O_EXCL, O_WRONLY, O_NONBLOCK } = constants;

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

/** A directory on the walk, remembered by identity rather than held open. */
interface Frame {
  name: string;
  dev: bigint;
  ino: bigint;
}

function fdPath(fd: number, name: string): string {
  return `/proc/self/fd/${fd}/${name}`;
}

function fstat(fd: number): BigIntStats {
  return fstatSync(fd, { bigint: true });
}

function kindOf(stat: BigIntStats): ResolvedFile["fileType"] {
  if (stat.isFile()) return "file";
  if (stat.isDirectory()) return "directory";
  return "other";
}

function splitPath(path: string): string[] {
  return path.split("/").filter((c) => c !== "" && c !== ".");
}

function errno(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code;
}

/** Errors of the node, not of the path: out of descriptors or memory, an I/O error, an interrupted call. */
const TRANSIENT_ERRNO = new Set(["EMFILE", "ENFILE", "ENOMEM", "ENOBUFS", "EIO", "EAGAIN", "EINTR", "EBUSY"]);

/** `{ transient: true }` when `error` says nothing about the path: what the trap had stays armed. */
function transientOf(error: unknown): { transient?: true } {
  return TRANSIENT_ERRNO.has(errno(error) ?? "") ? { transient: true } : {};
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
  const maxSymlinks = options.maxSymlinks ?? MAX_SYMLINKS;
  const maxComponents = options.maxComponents ?? MAX_PATH_COMPONENTS;
  assertAbsolute(path);
  const rootStat = fstat(rootFd);
  // The directories from the root to the current one: `..` pops to the directory we actually came from.
  const stack: Frame[] = [{ name: "", dev: rootStat.dev, ino: rootStat.ino }];
  const symlinks: string[] = [];
  let leftRoot = false;
  let followed = 0;
  let walked = 0;
  // Components still to look up, last first (pop is O(1); symlink targets are pushed reversed).
  const pending = splitPath(path).reverse();
  let dirFd = rootFd; // the current directory: rootFd, or a descriptor this walk owns
  let child: number | undefined; // the entry being looked at, owned until it becomes dirFd or the answer
  const enter = (fd: number) => {
    if (dirFd !== rootFd) closeSync(dirFd);
    dirFd = fd;
  };
  const currentPath = () =>
    `/${stack
      .slice(1)
      .map((f) => f.name)
      .join("/")}`;
  const checkBudget = () => {
    // Every pending component costs at least one lookup: refuse as soon as the total cannot fit.
    if (walked + pending.length > maxComponents) {
      throw new HiveError(
        "PathInvalid",
        `resolving the trap path needs more than ${maxComponents} path components (symlink targets included)`,
        {
          object: path,
          symlinks,
          bound: maxComponents,
          hint: "the container's symlinks lead too deep; trap the file by a shorter path",
        },
      );
    }
  };
  try {
    checkBudget();
    let final: { fd: number; stat: BigIntStats; name: string; created: boolean } | undefined;
    while (pending.length > 0) {
      const name = pending.pop() as string;
      const isLast = pending.length === 0;
      walked += 1;
      if (name === "..") {
        if (stack.length > 1) {
          stack.pop();
          const parent = stack[stack.length - 1] as Frame;
          if (stack.length === 1) enter(rootFd);
          else {
            child = openSync(`/proc/self/fd/${dirFd}/..`, O_PATH | constants.O_DIRECTORY | O_NOFOLLOW);
            const stat = fstat(child);
            if (stat.dev !== parent.dev || stat.ino !== parent.ino) {
              throw new HiveError("PathInvalid", "a directory on the trap path moved during resolution", {
                object: path,
                hint: "the container renamed a directory while Hive walked it; it is resolved again",
              });
            }
            enter(child);
            child = undefined;
          }
        } else leftRoot = true; // clamped, as the kernel does at a process's root
        if (isLast) {
          throw new HiveError("PathInvalid", "trap path resolves to a directory, not a file", {
            object: path,
          });
        }
        continue;
      }
      try {
        child = openSync(fdPath(dirFd, name), O_PATH | O_NOFOLLOW);
      } catch (error) {
        const code = errno(error);
        if (code === "ENOENT" && isLast && options.create) {
          final = createFile(dirFd, name, options.mode ?? 0o444);
          break;
        }
        if (code === "ENOENT" && !isLast && options.create) {
          // Missing directories on the way are created too (0755); mkdir never follows a planted symlink.
          createDirectory(dirFd, name);
          pending.push(name);
          walked -= 1; // the retried lookup is the same component
          continue;
        }
        if (code === "ENOENT" || code === "ENOTDIR") {
          const where = `${currentPath().replace(/\/$/, "")}/${name}`;
          if (leftRoot) {
            throw new HiveError(
              "PathEscapesContainer",
              `a symlink on the path points outside the container; ${where} does not exist inside it`,
              {
                object: path,
                symlinks,
                hint: "symlink targets are resolved inside the container only; trap the file the container itself sees",
              },
            );
          }
          throw new HiveError("FileNotFound", `${where} does not exist in the container`, {
            object: path,
            symlinks,
            hint: "fix the trap path, or set create: true to have Hive create the file",
          });
        }
        throw new HiveError("PathInvalid", `cannot open ${name} while resolving the trap path (${code})`, {
          object: path,
          cause: error,
          ...transientOf(error),
        });
      }
      const stat = fstat(child);
      if (stat.isSymbolicLink()) {
        closeSync(child);
        child = undefined;
        followed += 1;
        if (followed > maxSymlinks) {
          throw new HiveError(
            "PathInvalid",
            `more than ${maxSymlinks} symlinks while resolving the trap path`,
            {
              object: path,
              bound: maxSymlinks,
              hint: "the path has a symlink loop inside the container",
            },
          );
        }
        // readlink on the directory fd + name: no follow of the final component.
        const target = readlinkSync(fdPath(dirFd, name), "utf8");
        symlinks.push(`${currentPath().replace(/\/$/, "")}/${name} -> ${target}`);
        if (target.startsWith("/")) {
          // Re-rooted: an absolute target means the container's root, never the host's.
          stack.length = 1;
          enter(rootFd);
          leftRoot = true;
        }
        const parts = splitPath(target);
        for (let i = parts.length - 1; i >= 0; i--) pending.push(parts[i] as string);
        checkBudget();
        continue;
      }
      if (isLast) {
        final = { fd: child, stat, name, created: false };
        break;
      }
      if (!stat.isDirectory()) {
        throw new HiveError(
          "FileNotFound",
          `${currentPath().replace(/\/$/, "")}/${name} is not a directory`,
          {
            object: path,
            hint: "a component in the middle of the trap path is a file",
          },
        );
      }
      stack.push({ name, dev: stat.dev, ino: stat.ino });
      enter(child);
      child = undefined;
    }
    if (final === undefined) {
      throw new HiveError("PathInvalid", "trap path names the container root, not a file", { object: path });
    }
    child = final.fd; // closed below
    const resolvedPath = `${currentPath().replace(/\/$/, "")}/${final.name}`;
    const stated = { key: fileKeyFromStat(final.stat), parent: fileKeyFromStat(fstat(dirFd)) };
    // While both descriptors are held: the kernel names the identities to arm (trap-proof.ts).
    const armed = prove ? prove({ fileFd: final.fd, dirFd, resolvedPath, ...stated }) : stated;
    return {
      ...armed,
      resolvedPath,
      created: final.created,
      fileType: kindOf(final.stat),
      symlinks,
    };
  } finally {
    if (child !== undefined) closeSync(child);
    if (dirFd !== rootFd) closeSync(dirFd);
  }
}

function createDirectory(dirFd: number, name: string): void {
  try {
    mkdirSync(fdPath(dirFd, name), 0o755);
  } catch (error) {
    if (errno(error) === "EEXIST") return; // appeared meanwhile: the retried open decides what it is
    throw new HiveError("PathInvalid", `cannot create directory ${name} in the container (${errno(error)})`, {
      object: name,
      hint: "check the container's filesystem is writable",
      cause: error,
      ...transientOf(error),
    });
  }
}

/**
 * O_CREAT|O_EXCL|O_NOFOLLOW in the verified parent directory: a symlink planted under the
 * name (dangling or not) makes this fail with EEXIST instead of being followed.
 */
function createFile(
  dirFd: number,
  name: string,
  mode: number,
): { fd: number; stat: BigIntStats; name: string; created: boolean } {
  let fd: number;
  try {
    fd = openSync(fdPath(dirFd, name), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK, mode & 0o7777);
  } catch (error) {
    throw new HiveError("PathInvalid", `cannot create ${name} in the container (${errno(error)})`, {
      object: name,
      hint:
        errno(error) === "EEXIST"
          ? "the entry appeared while Hive created it; it is resolved again"
          : "check the container's filesystem is writable",
      cause: error,
      ...transientOf(error),
    });
  }
  try {
    fchmodSync(fd, mode & 0o7777);
    return { fd, stat: fstat(fd), name, created: true };
  } catch (error) {
    closeSync(fd);
    throw error;
  }
}
