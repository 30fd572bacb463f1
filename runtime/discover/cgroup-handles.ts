/**
 * A cgroup's directory by its id, asked of the kernel: on cgroup v2 the id the kernel records at
 * an access (bpf_get_current_cgroup_id) is the cgroup's kernfs node id, which open_by_handle_at(2)
 * takes as a file handle (FILEID_KERNFS) on the cgroup filesystem. No walk of the tree: a cgroup
 * is found whatever its depth (a container that mounts cgroup2 can nest its processes as deep as
 * it likes) and however many a container makes (one per access costs one call each, not a walk).
 * Needs CAP_DAC_READ_SEARCH, which the agent has; where the call is refused, or the filesystem is
 * not one whose handles are ids, `available` is false and the caller walks instead.
 */
import { closeSync, openSync, readlinkSync, realpathSync, statSync } from "node:fs";
import koffi from "koffi";
import { errnoName, libcFns } from "../kernel/libbpf-ffi.ts";

/** include/linux/exportfs.h: a kernfs node id as a file handle. */
const FILEID_KERNFS = 0xfe;
const O_CLOEXEC = 0o2000000;
const O_PATH = 0o10000000;
const O_DIRECTORY = 0o200000;
/** The handle is no file any more (the cgroup was removed), or never was one. */
const GONE = new Set(["ESTALE", "ENOENT"]);

export type HandleLookup = { path: string } | { gone: true };

export class CgroupHandles {
  /** Why ids cannot be looked up here (undefined when they can). */
  readonly unavailable: string | undefined;
  private readonly libc = libcFns();
  private readonly rootFd: number;
  /** The root as /proc/self/fd links spell it. */
  private readonly rootPath: string;
  /** struct file_handle: handle_bytes, handle_type, then the 8-byte id. */
  private readonly handle = Buffer.alloc(16);

  constructor(root: string) {
    // Opened for reading, not O_PATH: open_by_handle_at refuses an O_PATH descriptor as the mount (EBADF).
    this.rootFd = openSync(root, O_DIRECTORY | O_CLOEXEC);
    this.rootPath = realpathSync(root);
    this.handle.writeUInt32LE(8, 0);
    this.handle.writeInt32LE(FILEID_KERNFS, 4);
    this.unavailable = this.selfCheck(root);
  }

  /** The cgroup of `id`, as a path under the root ("/…"); `gone` when it no longer exists. */
  lookup(id: bigint): HandleLookup {
    this.handle.writeBigUInt64LE(id, 8);
    const fd = this.libc.open_by_handle_at(this.rootFd, this.handle, O_PATH | O_CLOEXEC) as number;
    if (fd < 0) {
      const errno = errnoName(koffi.errno());
      if (GONE.has(errno)) return { gone: true };
      throw new Error(`open_by_handle_at of cgroup ${id}: ${errno}`);
    }
    try {
      // A cgroup removed meanwhile is spelt "<path> (deleted)". A container may name its own
      // cgroup so too, to be taken for gone: the suffix is dropped, never believed (only the
      // kubelet's levels above decide whose it is, and a removed one does not open at all).
      const link = readlinkSync(`/proc/self/fd/${fd}`).replace(/ \(deleted\)$/, "");
      if (link === this.rootPath) return { path: "/" };
      // A cgroup outside the tree this root shows is none of this node's containers.
      return link.startsWith(`${this.rootPath}/`)
        ? { path: link.slice(this.rootPath.length) }
        : { gone: true };
    } finally {
      this.libc.close(fd);
    }
  }

  close(): void {
    closeSync(this.rootFd);
  }

  /** Looks the root itself up by its id: what a cgroup v2 filesystem answers, and nothing else does. */
  private selfCheck(root: string): string | undefined {
    try {
      const found = this.lookup(statSync(root, { bigint: true }).ino);
      return "path" in found && found.path === "/" ? undefined : "the filesystem does not open cgroup ids";
    } catch (error) {
      return error instanceof Error ? error.message : String(error);
    }
  }
}
