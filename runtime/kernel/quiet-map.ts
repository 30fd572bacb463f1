/**
 * The kernel's quiet map (hive_quiet): the cgroups whose accesses to an image layer's file alert
 * nobody, by (cgroup id, group). Every container of an image reaches the layer's one inode; one
 * that no trap selects would otherwise make an event of each access, only to be dropped here.
 *
 * User space is the only writer, and writes a key only for an access the kernel attributed to
 * that cgroup (bpf_get_current_cgroup_id, never a value a container hands over). Forgetting is
 * always safe (the next access is an event again), so clearing is wholesale, and the map is an
 * LRU: a flood of cgroups evicts, it never refuses. Groups are the loader's slot numbering, which
 * is this process's: an adopted map is cleared at open.
 */
import type { Logger } from "../log.ts";
import { decodeQuietKey, encodeQuietKey, QUIET_KEY_LAYOUT } from "./layout.ts";
import { errnoError, type Libbpf } from "./libbpf-ffi.ts";

/** hive_quiet's max_entries in bpf/hive.bpf.c. */
export const QUIET_CAPACITY = 16_384;
const ONE = Buffer.from([1]);

export class QuietMap {
  private readonly lib: Libbpf;
  private readonly fd: number;
  private readonly logger: Logger | undefined;
  /** Writes that failed since the last one logged: logged once per run of failures. */
  private failing = false;

  constructor(lib: Libbpf, fd: number, logger?: Logger) {
    this.lib = lib;
    this.fd = fd;
    this.logger = logger;
  }

  quiet(cgroupId: bigint, group: number): void {
    const rc = this.lib.bpf_map_update_elem(this.fd, encodeQuietKey(cgroupId, group), ONE, 0) as number;
    if (rc === 0) {
      this.failing = false;
      return;
    }
    // Not quieted costs one event per access, as before: logged, never thrown into the event path.
    if (!this.failing)
      this.logger?.warn("cannot quiet a cgroup in the kernel; its accesses stay events", {
        error: errnoError(-rc, "writing the quiet map", { object: "hive_quiet" }),
      });
    this.failing = true;
  }

  /** Removes every entry (first key, delete, again: no key is skipped while others go). */
  clear(): void {
    const key = Buffer.alloc(QUIET_KEY_LAYOUT.size);
    for (let i = 0; i <= QUIET_CAPACITY * 2; i++) {
      if ((this.lib.bpf_map_get_next_key(this.fd, null, key) as number) !== 0) return;
      const rc = this.lib.bpf_map_delete_elem(this.fd, key) as number;
      // ENOENT: the kernel evicted it meanwhile (LRU); anything else would repeat forever.
      if (rc !== 0 && rc !== -2) {
        this.logger?.error("cannot clear the quiet map; quieted cgroups stay quiet until it is", {
          error: errnoError(-rc, "clearing the quiet map", { object: "hive_quiet" }),
        });
        return;
      }
    }
  }

  /** What the map holds (diagnostics and tests). */
  entries(): Array<{ cgroupId: bigint; group: number }> {
    const out: Array<{ cgroupId: bigint; group: number }> = [];
    const key = Buffer.alloc(QUIET_KEY_LAYOUT.size);
    const next = Buffer.alloc(QUIET_KEY_LAYOUT.size);
    let first = true;
    while ((this.lib.bpf_map_get_next_key(this.fd, first ? null : key, next) as number) === 0) {
      first = false;
      next.copy(key);
      out.push(decodeQuietKey(key));
    }
    return out;
  }
}
