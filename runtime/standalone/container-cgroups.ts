/**
 * Which local container an access came from, by the cgroup the kernel recorded: what attributes
 * an access to an image layer's file (one inode every container of the image reaches) in
 * standalone mode. The cgroup id names a directory of the cgroup v2 filesystem
 * (runtime/discover/cgroup-containers.ts CgroupIndex); the container is the one whose cgroup, as
 * its runtime spec told the runtime (`linux.cgroupsPath`), is that directory or holds it.
 *
 * Only the runtime's own path decides, never a name below it: a process that makes cgroups of its
 * own below its container's (and names them after another container) is still its container's,
 * since its container's path is a prefix of them and another container's is not.
 */
import { CgroupIndex } from "../discover/cgroup-containers.ts";
import type { ContainerRecord } from "./watch-plan.ts";

/**
 * A spec's cgroupsPath as a path under the cgroup v2 root. The systemd driver's
 * `slice:prefix:name` becomes the slice's nested directories and `prefix-name.scope`
 * (`a-b.slice` lives in `a.slice/a-b.slice`); the cgroupfs driver's path is used as it is.
 */
export function cgroupDirOf(cgroupsPath: string): string {
  const parts = cgroupsPath.split(":");
  if (parts.length === 3 && !cgroupsPath.startsWith("/")) {
    const [slice, prefix, name] = parts as [string, string, string];
    const unit = name.endsWith(".slice") ? name : `${prefix}-${name}.scope`;
    return `${sliceDir(slice === "" ? "system.slice" : slice)}/${unit}`;
  }
  const path = `/${cgroupsPath
    .split("/")
    .filter((p) => p !== "" && p !== "." && p !== "..")
    .join("/")}`;
  return path;
}

/** `a-b-c.slice` → `/a.slice/a-b.slice/a-b-c.slice`; the root slice `-.slice` → ``. */
function sliceDir(slice: string): string {
  if (slice === "-.slice" || !slice.endsWith(".slice")) return slice === "-.slice" ? "" : `/${slice}`;
  const words = slice.slice(0, -".slice".length).split("-");
  return words.map((_, i) => `/${words.slice(0, i + 1).join("-")}.slice`).join("");
}

/** The container whose cgroup directory is `path` or holds it; the most specific when several do. */
export function containerOfPath(
  path: string,
  records: readonly ContainerRecord[],
): ContainerRecord | undefined {
  let best: { record: ContainerRecord; dir: string } | undefined;
  for (const record of records) {
    if (record.cgroupsPath === undefined) continue;
    const dir = cgroupDirOf(record.cgroupsPath);
    if (dir === "/" || dir === "") continue; // a container in the root cgroup could be anyone
    if (path !== dir && !path.startsWith(`${dir}/`)) continue;
    if (!best || dir.length > best.dir.length) best = { record, dir };
  }
  return best?.record;
}

export interface ContainerAttribution {
  /**
   * The container an access at CLOCK_MONOTONIC `atNs` from `cgroupId` came from: null when the
   * cgroup is no listed container's (the host, a system service, another runtime), undefined when
   * the cgroup is not found (gone before it could be looked up).
   */
  containerOf(cgroupId: bigint, atNs: bigint): Promise<ContainerRecord | null | undefined>;
  /** The runtime's containers changed (one deleted may come back with other labels): list them again. */
  invalidate(): void;
  /** Lists made so far (for tests and status). */
  readonly lists: number;
  /** Bumped by every invalidate(): an answer begun under an older one may be stale. */
  readonly generation: number;
}

export function createContainerAttribution(options: {
  cgroupRoot: string;
  /** Every container of the runtime, running or not (local-containers.ts records()). */
  records: () => Promise<readonly ContainerRecord[]>;
}): ContainerAttribution {
  const index = new CgroupIndex(options.cgroupRoot);
  let records: readonly ContainerRecord[] = [];
  /** CLOCK_MONOTONIC ns when the list `records` came from began: a container made after it may be missing. */
  let listedAt = -1n;
  /** Bumped by invalidate(): a list begun before it is not kept. */
  let generation = 0;
  let listing: Promise<void> | undefined;
  let lists = 0;
  const relist = () => {
    listing ??= (async () => {
      const began = process.hrtime.bigint();
      const at = generation;
      lists += 1;
      try {
        const got = await options.records();
        if (at === generation) {
          records = got;
          listedAt = began;
        }
      } finally {
        listing = undefined;
      }
    })();
    return listing;
  };
  return {
    async containerOf(cgroupId, atNs) {
      const path = index.path(cgroupId, atNs);
      if (path === undefined) return undefined;
      const known = containerOfPath(path, records);
      if (known || listedAt >= atNs) return known ?? null;
      // A container created since the last list: list once more (a burst of misses shares one).
      await (listing ?? relist());
      if (listedAt < atNs) await relist();
      return containerOfPath(path, records) ?? null;
    },
    invalidate() {
      generation += 1;
      listedAt = -1n;
      records = [];
    },
    get lists() {
      return lists;
    },
    get generation() {
      return generation;
    },
  };
}
