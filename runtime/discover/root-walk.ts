/**
 * The steps of the walk safe-path.ts makes inside a container's root, over one explicit state:
 * the directories from the root to the current one, the components still to look up, and what
 * the walk has spent (lookups, symlinks). Each step looks up ONE name with O_PATH|O_NOFOLLOW
 * through `/proc/self/fd/<dirfd>/<name>` and decides on the object the descriptor holds, so a
 * race can make the walk fail, never escape. safe-path.ts explains the threat.
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
} from "node:fs";
import { HiveError } from "../../api/errors.ts";

/** O_PATH is not in Node's constants; the value is the same on x86-64 and arm64 (asm-generic). */
export const O_PATH = 0o10000000;
const { O_NOFOLLOW, O_CREAT, O_EXCL, O_WRONLY, O_NONBLOCK, O_DIRECTORY } = constants;

/** A directory on the walk, remembered by identity rather than held open. */
export interface Frame {
  name: string;
  dev: bigint;
  ino: bigint;
}

/** The entry the walk ends on, its descriptor still held. */
export interface FoundEntry {
  fd: number;
  stat: BigIntStats;
  name: string;
  created: boolean;
}

/** What bounds and shapes one walk (defaults applied by the caller). */
export interface WalkLimits {
  maxSymlinks: number;
  maxComponents: number;
  /** Create missing directories on the way and the final file when it does not exist. */
  create: boolean;
  /** Permission bits of a created file. */
  mode: number;
}

/** Everything one walk knows; the steps below read and change only this. */
export interface Walk {
  readonly rootFd: number;
  /** The trap path as asked for, named in every error. */
  readonly path: string;
  readonly limits: WalkLimits;
  /** The directories from the root to the current one: `..` pops to the directory we actually came from. */
  stack: Frame[];
  /** Components still to look up, last first (pop is O(1); symlink targets are pushed reversed). */
  pending: string[];
  /** Symlinks followed, as `link -> target`. */
  symlinks: string[];
  /** Lookups made so far, symlink targets and `..` included. */
  walked: number;
  /** Symlinks followed so far. */
  followed: number;
  /** A symlink or `..` tried to leave the root (re-rooted or clamped): a miss then says so. */
  leftRoot: boolean;
  /** The current directory: rootFd, or a descriptor this walk owns. */
  dirFd: number;
  /** The entry being looked at, owned until it becomes dirFd or the answer. */
  child: number | undefined;
}

export function fdPath(fd: number, name: string): string {
  return `/proc/self/fd/${fd}/${name}`;
}

export function fstat(fd: number): BigIntStats {
  return fstatSync(fd, { bigint: true });
}

export function splitPath(path: string): string[] {
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

/** A walk of `path` standing at the root `rootFd` holds, nothing looked up yet. */
export function startWalk(rootFd: number, path: string, limits: WalkLimits): Walk {
  const rootStat = fstat(rootFd);
  return {
    rootFd,
    path,
    limits,
    stack: [{ name: "", dev: rootStat.dev, ino: rootStat.ino }],
    pending: splitPath(path).reverse(),
    symlinks: [],
    walked: 0,
    followed: 0,
    leftRoot: false,
    dirFd: rootFd,
    child: undefined,
  };
}

/** Releases what the walk still owns; rootFd stays the caller's. */
export function closeWalk(walk: Walk): void {
  if (walk.child !== undefined) closeSync(walk.child);
  if (walk.dirFd !== walk.rootFd) closeSync(walk.dirFd);
}

/** The current directory inside the container, `/` at the root. */
export function currentPath(walk: Pick<Walk, "stack">): string {
  return `/${walk.stack
    .slice(1)
    .map((f) => f.name)
    .join("/")}`;
}

/** `name` in the current directory, as a path inside the container. */
export function entryPath(walk: Pick<Walk, "stack">, name: string): string {
  return `${currentPath(walk).replace(/\/$/, "")}/${name}`;
}

/** Every pending component costs at least one lookup: refuse as soon as the total cannot fit. */
export function checkBudget(walk: Pick<Walk, "walked" | "pending" | "limits" | "path" | "symlinks">): void {
  const { maxComponents } = walk.limits;
  if (walk.walked + walk.pending.length > maxComponents) {
    throw new HiveError(
      "PathInvalid",
      `resolving the trap path needs more than ${maxComponents} path components (symlink targets included)`,
      {
        object: walk.path,
        symlinks: walk.symlinks,
        bound: maxComponents,
        hint: "the container's symlinks lead too deep; trap the file by a shorter path",
      },
    );
  }
}

/** Makes `fd` the current directory, closing the previous one unless it is the root. */
function enter(walk: Walk, fd: number): void {
  if (walk.dirFd !== walk.rootFd) closeSync(walk.dirFd);
  walk.dirFd = fd;
}

/**
 * Takes the next component off the walk: `..` climbs, any other name is looked up. Returns the
 * final entry when the walk ends on it, undefined while there is more to walk.
 */
export function step(walk: Walk): FoundEntry | undefined {
  const name = walk.pending.pop() as string;
  const isLast = walk.pending.length === 0;
  walk.walked += 1;
  if (name !== "..") return lookUp(walk, name, isLast);
  climb(walk);
  if (isLast) {
    throw new HiveError("PathInvalid", "trap path resolves to a directory, not a file", {
      object: walk.path,
    });
  }
  return undefined;
}

/** `..`: back to the directory we came from, clamped at the root as the kernel does at a process's root. */
function climb(walk: Walk): void {
  if (walk.stack.length === 1) {
    walk.leftRoot = true;
    return;
  }
  walk.stack.pop();
  const parent = walk.stack[walk.stack.length - 1] as Frame;
  if (walk.stack.length === 1) {
    enter(walk, walk.rootFd);
    return;
  }
  // Reopened through the current directory, and it must be the one remembered.
  walk.child = openSync(fdPath(walk.dirFd, ".."), O_PATH | O_DIRECTORY | O_NOFOLLOW);
  const stat = fstat(walk.child);
  if (stat.dev !== parent.dev || stat.ino !== parent.ino) {
    throw new HiveError("PathInvalid", "a directory on the trap path moved during resolution", {
      object: walk.path,
      hint: "the container renamed a directory while Hive walked it; it is resolved again",
    });
  }
  enter(walk, walk.child);
  walk.child = undefined;
}

/** One name in the current directory: a symlink is followed, a directory entered, the last entry returned. */
function lookUp(walk: Walk, name: string, isLast: boolean): FoundEntry | undefined {
  try {
    walk.child = openSync(fdPath(walk.dirFd, name), O_PATH | O_NOFOLLOW);
  } catch (error) {
    return onMissing(walk, name, isLast, error);
  }
  const stat = fstat(walk.child);
  if (stat.isSymbolicLink()) {
    closeSync(walk.child);
    walk.child = undefined;
    followSymlink(walk, name);
    return undefined;
  }
  if (isLast) return { fd: walk.child, stat, name, created: false };
  descend(walk, name, stat);
  return undefined;
}

/** Into the directory `walk.child` holds, which must be one. */
function descend(walk: Walk, name: string, stat: BigIntStats): void {
  if (!stat.isDirectory()) {
    throw new HiveError("FileNotFound", `${entryPath(walk, name)} is not a directory`, {
      object: walk.path,
      hint: "a component in the middle of the trap path is a file",
    });
  }
  walk.stack.push({ name, dev: stat.dev, ino: stat.ino });
  enter(walk, walk.child as number);
  walk.child = undefined;
}

/** Queues the target of the symlink `name` in the current directory, within the symlink and lookup bounds. */
function followSymlink(walk: Walk, name: string): void {
  walk.followed += 1;
  const { maxSymlinks } = walk.limits;
  if (walk.followed > maxSymlinks) {
    throw new HiveError("PathInvalid", `more than ${maxSymlinks} symlinks while resolving the trap path`, {
      object: walk.path,
      bound: maxSymlinks,
      hint: "the path has a symlink loop inside the container",
    });
  }
  // readlink on the directory fd + name: no follow of the final component.
  const target = readlinkSync(fdPath(walk.dirFd, name), "utf8");
  walk.symlinks.push(`${entryPath(walk, name)} -> ${target}`);
  if (target.startsWith("/")) {
    // Re-rooted: an absolute target means the container's root, never the host's.
    walk.stack.length = 1;
    enter(walk, walk.rootFd);
    walk.leftRoot = true;
  }
  const parts = splitPath(target);
  for (let i = parts.length - 1; i >= 0; i--) walk.pending.push(parts[i] as string);
  checkBudget(walk);
}

/**
 * The lookup of `name` failed: with `create`, a missing file is created (the walk ends on it)
 * or a missing directory is created and looked up again; otherwise the failure is thrown.
 */
function onMissing(walk: Walk, name: string, isLast: boolean, error: unknown): FoundEntry | undefined {
  const code = errno(error);
  if (code === "ENOENT" && walk.limits.create) {
    if (isLast) return createFile(walk.dirFd, name, walk.limits.mode);
    // Missing directories on the way are created too (0755); mkdir never follows a planted symlink.
    createDirectory(walk.dirFd, name);
    walk.pending.push(name);
    walk.walked -= 1; // the retried lookup is the same component
    return undefined;
  }
  if (code === "ENOENT" || code === "ENOTDIR") throw notFound(walk, name);
  throw new HiveError("PathInvalid", `cannot open ${name} while resolving the trap path (${code})`, {
    object: walk.path,
    cause: error,
    ...transientOf(error),
  });
}

/** A miss: outside the container when a symlink or `..` tried to leave it, else simply not there. */
function notFound(walk: Walk, name: string): HiveError {
  const where = entryPath(walk, name);
  if (walk.leftRoot) {
    return new HiveError(
      "PathEscapesContainer",
      `a symlink on the path points outside the container; ${where} does not exist inside it`,
      {
        object: walk.path,
        symlinks: walk.symlinks,
        hint: "symlink targets are resolved inside the container only; trap the file the container itself sees",
      },
    );
  }
  return new HiveError("FileNotFound", `${where} does not exist in the container`, {
    object: walk.path,
    symlinks: walk.symlinks,
    hint: "fix the trap path, or set create: true to have Hive create the file",
  });
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
function createFile(dirFd: number, name: string, mode: number): FoundEntry {
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
